// Small helpers shared by the engine's tests.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/random.h"

namespace mixlab::testing {

inline Tensor rand64(const Shape& shape, uint64_t seed, bool requires_grad = true) {
  Generator gen(seed);
  Tensor t = Tensor::uniform(shape, -1.0, 1.0, gen, DType::F64);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

inline Tensor rand32(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return Tensor::uniform(shape, -1.0, 1.0, gen, DType::F32);
}

// Runs gradcheck and reports the worst element when it fails.
#define CHECK_GRADS(fn, inputs)                            \
  do {                                                     \
    auto gc_result_ = ::mixlab::gradcheck((fn), (inputs)); \
    INFO("worst: " << gc_result_.worst);                   \
    CHECK(gc_result_.ok);                                  \
  } while (0)

inline void check_close(const std::vector<double>& a, const std::vector<double>& b,
                        double tol = 1e-9) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    CHECK(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])));
  }
}

}  // namespace mixlab::testing
