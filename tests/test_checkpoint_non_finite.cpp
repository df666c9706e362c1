// A checkpoint whose weights hold NaN or infinity (written by a run that diverged) is refused at
// load with the tensor's name, and the model keeps its own values.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/random.h"
#include "nn/layers.h"
#include "tests/temp_dir.h"
#include "train/run/checkpoint.h"
#include "train/optim/optimizer.h"

using namespace mixlab;

namespace {

struct Net : Module {
  std::shared_ptr<Linear> fc;
  Tensor scale;  // a float64 buffer
  explicit Net(uint64_t seed) {
    Generator gen(seed);
    fc = register_module("fc", std::make_shared<Linear>(3, 2, true, gen));
    scale = register_buffer("scale", Tensor::full({2}, 1.5, DType::F64));
  }
  std::string type_name() const override { return "Net"; }
};

// Sets element `index` of `t` to `value`.
void poison(Tensor& t, int64_t index, double value) {
  NoGradGuard no_grad;
  std::vector<double> v = t.to_double_vector();
  v[static_cast<size_t>(index)] = value;
  Tensor poisoned = Tensor::from_data(v, t.shape());
  t.copy_(poisoned);
}

std::string model_load_error(const std::string& path, Module& model) {
  try {
    load_weights(path, model);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("checkpoint: weights holding NaN or infinity are refused, naming the tensor") {
  mixlab::testing::TempDir dir;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* tensor;
    int64_t index;
    double value;
    const char* shown;
  };
  for (const Case& c : {Case{"fc.weight", 4, kNaN, "nan"}, Case{"fc.bias", 1, -kInf, "-inf"},
                        Case{"scale", 0, kInf, "inf"}}) {
    INFO(c.tensor);
    Net diverged(1);
    Tensor target = c.tensor == std::string("fc.weight") ? diverged.fc->weight
                    : c.tensor == std::string("fc.bias") ? diverged.fc->bias
                                                         : diverged.scale;
    poison(target, c.index, c.value);
    const std::string path = dir.file(std::string(c.tensor) + ".safetensors");
    save_weights(path, diverged);  // saving a diverged model is allowed: it records what happened

    Net model(2);
    const std::vector<float> before = model.fc->weight.to_float_vector();
    const std::string error = model_load_error(path, model);
    CHECK(error.find("tensor '" + std::string(c.tensor) + "' holds 1 non-finite value(s)") !=
          std::string::npos);
    CHECK(error.find("element " + std::to_string(c.index) + ", is " + c.shown) !=
          std::string::npos);
    CHECK(error.find(path) != std::string::npos);
    CHECK(model.fc->weight.to_float_vector() == before);
  }
}

TEST_CASE("checkpoint: a training checkpoint with a NaN weight is refused by load_checkpoint") {
  mixlab::testing::TempDir dir;
  Net net(3);
  Sgd optimizer(param_groups(net, 0.0), SgdOptions{0.1, 0.9});
  // One step creates the momentum buffers; then poison the model weight.
  for (auto& [name, p] : net.named_parameters()) p.set_grad(Tensor::full(p.shape(), 1.0));
  optimizer.step();
  poison(net.fc->weight, 0, std::numeric_limits<double>::quiet_NaN());
  save_checkpoint(dir.file("last.safetensors"), net, optimizer, TrainingState{});

  Net fresh(4);
  Sgd fresh_optimizer(param_groups(fresh, 0.0), SgdOptions{0.1, 0.9});
  const std::vector<float> before = fresh.fc->weight.to_float_vector();
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("last.safetensors"), fresh, fresh_optimizer),
                       doctest::Contains("tensor 'fc.weight' holds 1 non-finite value(s)"), Error);
  CHECK(fresh.fc->weight.to_float_vector() == before);
}
