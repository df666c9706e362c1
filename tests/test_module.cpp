// Module's tensors (nn/module.h): what a checkpoint holds, what to() moves and converts, and what
// print() shows, for parameters, buffers and transient buffers.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "nn/module.h"

using namespace mixlab;

namespace {

class HoldsEveryKind : public Module {
 public:
  HoldsEveryKind() {
    weight = register_parameter("weight", Tensor::ones({2, 3}));
    table = register_buffer("table", Tensor::ones({4}));
    scale = register_buffer("scale", Tensor::ones({3}), /*persistent=*/false);
    index = register_buffer("index", Tensor::from_data(std::vector<int32_t>{0, 2, 1}, {3}), false);
  }
  std::string type_name() const override { return "HoldsEveryKind"; }
  Tensor weight, table, scale, index;
};

class Outer : public Module {
 public:
  Outer() { inner = register_module("inner", std::make_shared<HoldsEveryKind>()); }
  std::string type_name() const override { return "Outer"; }
  std::shared_ptr<HoldsEveryKind> inner;
};

}  // namespace

TEST_CASE("module: transient buffers move and convert with to() but are no checkpoint keys") {
  Outer m;
  std::vector<std::string> keys;
  for (const auto& [name, t] : m.named_tensors()) keys.push_back(name);
  CHECK(keys == std::vector<std::string>{"inner.weight", "inner.table"});
  CHECK(m.parameter_count() == 6);
  CHECK(m.print().find("scale[3](buffer, not saved)") != std::string::npos);
  CHECK(m.print().find("table[4](buffer)") != std::string::npos);

  // Handles held by the module see the new data, transient ones included.
  m.to(DType::F64);
  CHECK(m.inner->weight.dtype() == DType::F64);
  CHECK(m.inner->table.dtype() == DType::F64);
  CHECK(m.inner->scale.dtype() == DType::F64);
  CHECK(m.inner->index.dtype() == DType::I32);  // an index stays an index
  m.to(Device::ref());
  for (const Tensor* t : {&m.inner->weight, &m.inner->table, &m.inner->scale, &m.inner->index})
    CHECK(t->device() == Device::ref());
  CHECK(m.inner->index.to(Device::cpu()).to_double_vector() == std::vector<double>{0, 2, 1});
}
