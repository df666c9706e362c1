// External attention's memory weights (backends/cpu/cpu_token_softmax.cpp, whose comment has
// the formulas) for float32 in vector registers: the columns in whole registers, the softmax's
// sums down the tokens in a row of register accumulators. Declared in every build: without
// vector registers token_softmax_forward and _backward return false and the kernel's plain loops
// run.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/simd/simd_lanes.h"
#include "backends/cpu/simd/vector_math.h"

namespace mixlab::cpu::simd {

#if defined(MIXLAB_HAS_LANES)
namespace token_softmax_lanes {

// One example's block: tokens rows of groups · slots columns.
struct Block {
  int64_t tokens, groups, slots;
  int64_t columns() const { return groups * slots; }
};

// ---- float32 in vector registers: the columns in whole registers (kWidth at a time), the last
// columns % kWidth (of a row, or of a head's segment of slots) one at a time. No masked loads or
// stores (on AMD's AVX2 a masked store costs several plain ones), no division in a loop. ----
constexpr int64_t kW = Lanes::kWidth;

inline void forward_example_lanes(const float* logits, const float* valid, float* weights,
                                  float* denom, Block k, float eps, float* scratch) {
  const int64_t cols = k.columns(), full = cols - cols % kW;
  const float lowest = -std::numeric_limits<float>::infinity();
  const auto counts = [valid](int64_t n) { return !valid || valid[n] != 0.0f; };
  float* hi = scratch;
  float* inv = scratch + cols;
  std::fill_n(hi, cols, lowest);
  for (int64_t n = 0; n < k.tokens; ++n) {
    if (!counts(n)) continue;
    const float* row = logits + n * cols;
    for (int64_t c = 0; c < full; c += kW)
      Lanes::storeu(hi + c, Lanes::max(Lanes::loadu(row + c), Lanes::loadu(hi + c)));
    for (int64_t c = full; c < cols; ++c) hi[c] = std::max(hi[c], row[c]);
  }
  for (int64_t c = 0; c < cols; ++c) {
    if (hi[c] == lowest) hi[c] = 0.0f;  // no valid token (or only -inf): e = 0 down the column
    inv[c] = 0.0f;
  }
  // e = exp(L − shift) at the valid tokens, 0 elsewhere (into W's memory), summed down columns.
  for (int64_t n = 0; n < k.tokens; ++n) {
    float* e = weights + n * cols;
    if (!counts(n)) {
      std::fill_n(e, cols, 0.0f);
      continue;
    }
    const float* row = logits + n * cols;
    for (int64_t c = 0; c < full; c += kW) {
      const Lanes::V x =
          vector_math::exp_of(Lanes::sub(Lanes::loadu(row + c), Lanes::loadu(hi + c)));
      Lanes::storeu(e + c, x);
      Lanes::storeu(inv + c, Lanes::add(Lanes::loadu(inv + c), x));
    }
    for (int64_t c = full; c < cols; ++c) inv[c] += (e[c] = exp_of(row[c] - hi[c]));
  }
  for (int64_t c = 0; c < cols; ++c) inv[c] = inv[c] > 0.0f ? 1.0f / inv[c] : 0.0f;
  // P = e / Σ e in place, D = eps + Σ over each segment's slots, W = P / D.
  const int64_t full_slots = k.slots - k.slots % kW;
  for (int64_t n = 0; n < k.tokens; ++n)
    for (int64_t g = 0; g < k.groups; ++g) {
      float* p = weights + n * cols + g * k.slots;
      const float* scale = inv + g * k.slots;
      Lanes::V acc = Lanes::zero();
      for (int64_t s = 0; s < full_slots; s += kW) {
        const Lanes::V x = Lanes::mul(Lanes::loadu(p + s), Lanes::loadu(scale + s));
        Lanes::storeu(p + s, x);
        acc = Lanes::add(acc, x);
      }
      float total = Lanes::sum(acc);
      for (int64_t s = full_slots; s < k.slots; ++s) total += (p[s] *= scale[s]);
      total += eps;
      denom[n * k.groups + g] = total;
      const float r = 1.0f / total;
      const Lanes::V r_v = Lanes::set1(r);
      for (int64_t s = 0; s < full_slots; s += kW)
        Lanes::storeu(p + s, Lanes::mul(Lanes::loadu(p + s), r_v));
      for (int64_t s = full_slots; s < k.slots; ++s) p[s] *= r;
    }
}

inline void backward_example_lanes(const float* dweights, const float* weights, const float* denom,
                                   float* dlogits, float* sums, Block k, float* scratch) {
  const int64_t cols = k.columns(), full_slots = k.slots - k.slots % kW;
  float* along = scratch;
  std::fill_n(along, cols, 0.0f);
  // dP = (dW − Σ_s dW ∘ W) / D into dL, and Σ_n P ∘ dP down the columns (P = W ∘ D).
  for (int64_t n = 0; n < k.tokens; ++n)
    for (int64_t g = 0; g < k.groups; ++g) {
      const int64_t at = n * cols + g * k.slots;
      const float* dw = dweights + at;
      const float* w = weights + at;
      float* d = dlogits + at;
      float* col = along + g * k.slots;
      const float den = denom[n * k.groups + g], inv_den = 1.0f / den;
      Lanes::V dot_v = Lanes::zero();
      for (int64_t s = 0; s < full_slots; s += kW)
        dot_v = Lanes::fmadd(Lanes::loadu(dw + s), Lanes::loadu(w + s), dot_v);
      float dot = Lanes::sum(dot_v);
      for (int64_t s = full_slots; s < k.slots; ++s) dot += dw[s] * w[s];
      const Lanes::V dot_b = Lanes::set1(dot), inv_b = Lanes::set1(inv_den),
                     den_b = Lanes::set1(den);
      for (int64_t s = 0; s < full_slots; s += kW) {
        const Lanes::V dp = Lanes::mul(Lanes::sub(Lanes::loadu(dw + s), dot_b), inv_b);
        Lanes::storeu(d + s, dp);
        const Lanes::V p = Lanes::mul(Lanes::loadu(w + s), den_b);
        Lanes::storeu(col + s, Lanes::fmadd(p, dp, Lanes::loadu(col + s)));
      }
      for (int64_t s = full_slots; s < k.slots; ++s) {
        d[s] = (dw[s] - dot) * inv_den;
        col[s] += w[s] * den * d[s];
      }
    }
  // dL = P (dP − Σ_n P ∘ dP), and its sums down the columns when asked.
  if (sums) std::fill_n(sums, cols, 0.0f);
  for (int64_t n = 0; n < k.tokens; ++n)
    for (int64_t g = 0; g < k.groups; ++g) {
      const int64_t at = n * cols + g * k.slots;
      const float* w = weights + at;
      float* d = dlogits + at;
      const float* col = along + g * k.slots;
      float* total = sums ? sums + g * k.slots : nullptr;
      const float den = denom[n * k.groups + g];
      const Lanes::V den_b = Lanes::set1(den);
      for (int64_t s = 0; s < full_slots; s += kW) {
        const Lanes::V p = Lanes::mul(Lanes::loadu(w + s), den_b);
        const Lanes::V dl = Lanes::mul(p, Lanes::sub(Lanes::loadu(d + s), Lanes::loadu(col + s)));
        Lanes::storeu(d + s, dl);
        if (total) Lanes::storeu(total + s, Lanes::add(Lanes::loadu(total + s), dl));
      }
      for (int64_t s = full_slots; s < k.slots; ++s) {
        d[s] = w[s] * den * (d[s] - col[s]);
        if (total) total[s] += d[s];
      }
    }
}

}  // namespace token_softmax_lanes
#endif

// W, D from the logits of one example (valid: null or one flag a token); scratch: 2 · columns.
inline bool token_softmax_forward(const float* logits, const float* valid, float* weights,
                                  float* denom, int64_t tokens, int64_t groups, int64_t slots,
                                  float eps, float* scratch) {
#if defined(MIXLAB_HAS_LANES)
  token_softmax_lanes::forward_example_lanes(logits, valid, weights, denom, {tokens, groups, slots},
                                             eps, scratch);
  return true;
#else
  (void)logits, (void)valid, (void)weights, (void)denom, (void)tokens, (void)groups, (void)slots,
      (void)eps, (void)scratch;
  return false;
#endif
}

// dL (and its sums down the tokens when sums is not null) of one example; scratch: columns.
inline bool token_softmax_backward(const float* dweights, const float* weights, const float* denom,
                                   float* dlogits, float* sums, int64_t tokens, int64_t groups,
                                   int64_t slots, float* scratch) {
#if defined(MIXLAB_HAS_LANES)
  token_softmax_lanes::backward_example_lanes(dweights, weights, denom, dlogits, sums,
                                              {tokens, groups, slots}, scratch);
  return true;
#else
  (void)dweights, (void)weights, (void)denom, (void)dlogits, (void)sums, (void)tokens, (void)groups,
      (void)slots, (void)scratch;
  return false;
#endif
}

}  // namespace mixlab::cpu::simd
