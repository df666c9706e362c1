// Float32 products for the tests of the CPU's own product kernels (test_tall_gemm.cpp,
// test_long_gemm.cpp): operands filled with a fixed pattern, the product through the CPU
// backend's gemm on a given number of threads, and a check of every element against float64.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/backend.h"
#include "core/parallel.h"

namespace mixlab::testing {

struct GemmOperands {
  std::vector<float> a, b, c;  // every batch item's storage, padding included
  GemmArgs g;                  // the product (its pointers set when it runs)
};

// Operands for g (its shape, leading dimensions, strides and batch), filled with sines.
inline GemmOperands gemm_operands(const GemmArgs& g) {
  const auto fill = [](int64_t count, double phase) {
    std::vector<float> v(static_cast<size_t>(count));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(std::sin(phase + 0.731 * static_cast<double>(i)));
    return v;
  };
  GemmOperands o{fill(g.stride_a * g.batch, 0.1), fill(g.stride_b * g.batch, 0.2),
                 fill(g.stride_c * g.batch, 0.3), g};
  return o;
}

// C after the product through the CPU backend's gemm on `threads` threads.
inline std::vector<float> backend_product(GemmOperands o, int threads) {
  o.g.a = o.a.data(), o.g.b = o.b.data(), o.g.c = o.c.data();
  const int saved = num_threads();
  set_num_threads(threads);
  backend_for(Device::cpu()).gemm(o.g);
  set_num_threads(saved);
  return o.c;
}

// `got` (C after the product on `before`) against alpha·op(A)·op(B) + beta·C in float64, to
// float32's rounding over k terms; the padding past n in C's rows untouched.
inline void check_product_against_float64(const GemmOperands& before,
                                          const std::vector<float>& got) {
  const GemmArgs& g = before.g;
  double worst = 0;
  for (int64_t i = 0; i < g.batch; ++i)
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t col = 0; col < g.ldc; ++col) {
        const size_t at = static_cast<size_t>(i * g.stride_c + r * g.ldc + col);
        if (col >= g.n) {
          REQUIRE(got[at] == before.c[at]);
          continue;
        }
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const int64_t a_at = i * g.stride_a + (g.trans_a ? p * g.lda + r : r * g.lda + p);
          const int64_t b_at = i * g.stride_b + (g.trans_b ? col * g.ldb + p : p * g.ldb + col);
          sum += static_cast<double>(before.a[static_cast<size_t>(a_at)]) *
                 before.b[static_cast<size_t>(b_at)];
        }
        const double expected = g.alpha * sum + g.beta * before.c[at];
        worst = std::max(worst, std::fabs(got[at] - expected) / (1.0 + std::fabs(expected)));
      }
  CHECK(worst < 2e-5 * std::sqrt(static_cast<double>(g.k)));
}

}  // namespace mixlab::testing
