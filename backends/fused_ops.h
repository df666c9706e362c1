// Per-element formulas of the fused kernels (the "fused" block of backends/kernels.def), written
// once for the CPU (backends/cpu/cpu_fused.cpp) and CUDA (backends/cuda/fused.cu). Each one is
// the formula of the unfused ops it replaces, in the same order of operations, so a fused path
// gives the numbers the unfused one gave.
#pragma once
#include <cstdint>

#include "backends/elementwise_ops.h"
#include "core/random.h"

namespace mixlab::fused {

// The factor dropout_mask writes at flat index i (1/(1-p) kept, 0 dropped), with mix64(seed)
// and dropout_threshold(p) computed once by the caller (core/random.h).
template <typename T>
MIXLAB_HOST_DEVICE T dropout_factor(uint64_t mixed_seed, uint64_t i, uint64_t threshold, T keep) {
  return dropout_kept(mixed_seed, i, threshold) ? keep : T(0);
}

// What dropout_mask calls the kept value: the same rounding of 1/(1-p) on every backend.
template <typename T>
MIXLAB_HOST_DEVICE T dropout_keep(double p) {
  return static_cast<T>(1.0 / (1.0 - p));
}

// gelu(x + b) as add then the GeluErf unary op computed it; `pre` receives x + b. (The CPU splits
// it into two loops over a row, the same operations, so that each vectorises.)
template <typename M, typename T>
MIXLAB_HOST_DEVICE T bias_gelu(T x, T b, T& pre) {
  pre = x + b;
  return apply_unary<UnaryOp::GeluErf, M>(pre, T(0));
}

// The gradient through gelu at `pre`, as mul(dy, GeluErfGrad(pre)) computed it.
template <typename M, typename T>
MIXLAB_HOST_DEVICE T bias_gelu_grad(T dy, T pre) {
  return dy * apply_unary<UnaryOp::GeluErfGrad, M>(pre, T(0));
}

// GLU's gate a · σ(b), as mul(a, sigmoid(b)) computed it.
template <typename M, typename T>
MIXLAB_HOST_DEVICE T glu(T a, T b) {
  return a * apply_unary<UnaryOp::Sigmoid, M>(b, T(0));
}

// Its gradients for a and b, as mul's and sigmoid's rules (g · σ(1 − σ)) computed them.
template <typename M, typename T>
MIXLAB_HOST_DEVICE void glu_grad(T dy, T a, T b, T& da, T& db) {
  const T s = apply_unary<UnaryOp::Sigmoid, M>(b, T(0));
  da = dy * s;
  db = (dy * a) * (s * (-s + T(1)));
}

}  // namespace mixlab::fused
