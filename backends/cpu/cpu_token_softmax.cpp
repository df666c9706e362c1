// External attention's memory weights (kernels.def: token_softmax_normalize), forward and
// backward side by side. One item (an example's head) is a [slots, tokens] block, 64 × 49 floats
// (12.5 KB) in the classifiers, which stays in L1 through all of the kernel's passes. The unfused
// chain (masked_fill, softmax, a multiply by the "any valid token" mask, sum_normalize) read and
// wrote the whole [B, h, S, N] tensor four times each way.
//
//   forward:   P[s, n] = softmax over the valid n of L[s, ·],  D[n] = eps + Σ_s P[s, n],
//              W[s, n] = P[s, n] / D[n]
//   backward:  P = W ∘ D,  dP[s, n] = (dW[s, n] − Σ_s' dW[s', n] W[s', n]) / D[n],
//              dL[s, n] = P[s, n] (dP[s, n] − Σ_n' P[s, n'] dP[s, n']),
//              and, when asked, Σ_n dL[s, n]: the gradient of a bias on slot s's row (M_k's),
//              which the softmax cancels, so that the forward never adds it
//
// Every pass walks the block row after row (a slot's tokens), in address order, with the sums
// over the slots kept in a row of `tokens` accumulators: passes down the columns (196 bytes a
// step) waited on every cache line. P is built in W's memory and never stored apart: the backward
// takes it as W ∘ D (within two roundings of P), which saves a stream each way and the memory of
// a saved [B, h, S, N] tensor.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/fast_math.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/vector_math.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

// ---- any dtype, any build: plain loops ----
template <typename T>
void forward_item(const T* logits, const T* valid, T* weights, T* denom, int64_t slots,
                  int64_t tokens, T eps) {
  const T lowest = -std::numeric_limits<T>::infinity();
  std::fill_n(denom, tokens, T(0));
  for (int64_t s = 0; s < slots; ++s) {  // P's row into W's memory, and D's sums
    const T* row = logits + s * tokens;
    T* p = weights + s * tokens;
    T hi = lowest;
    for (int64_t n = 0; n < tokens; ++n)
      if ((!valid || valid[n] != T(0)) && row[n] > hi) hi = row[n];
    if (hi == lowest) {  // no valid token: every weight is 0
      std::fill_n(p, tokens, T(0));
      continue;
    }
    T total = 0;
    for (int64_t n = 0; n < tokens; ++n) {
      p[n] = (!valid || valid[n] != T(0)) ? cpu::exp_of(row[n] - hi) : T(0);
      total += p[n];
    }
    const T inv = T(1) / total;
    for (int64_t n = 0; n < tokens; ++n) denom[n] += (p[n] *= inv);
  }
  for (int64_t n = 0; n < tokens; ++n) denom[n] += eps;
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t n = 0; n < tokens; ++n) weights[s * tokens + n] /= denom[n];
}

// `slot_sums` (null: not wanted) gets each slot's row sum of dL.
template <typename T>
void backward_item(const T* dweights, const T* weights, const T* denom, T* dlogits, T* slot_sums,
                   int64_t slots, int64_t tokens, T* dot) {
  std::fill_n(dot, tokens, T(0));
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t n = 0; n < tokens; ++n)
      dot[n] += dweights[s * tokens + n] * weights[s * tokens + n];
  for (int64_t s = 0; s < slots; ++s) {
    const T* dw = dweights + s * tokens;
    const T* w = weights + s * tokens;
    T* d = dlogits + s * tokens;
    T along = 0;
    for (int64_t n = 0; n < tokens; ++n) {
      d[n] = (dw[n] - dot[n]) / denom[n];
      along += w[n] * denom[n] * d[n];
    }
    T total = 0;
    for (int64_t n = 0; n < tokens; ++n) total += (d[n] = w[n] * denom[n] * (d[n] - along));
    if (slot_sums) slot_sums[s] = total;
  }
}

#if defined(MIXLAB_HAS_LANES)
// ---- float32 in vector registers: the tokens in whole registers (kWidth at a time: 48 of 49
// with AVX2 or AVX-512), the last tokens % kWidth one at a time. No masked loads or stores (on
// AMD's AVX2 a masked store costs several plain ones, and a row of 49 had two a pass), no
// log-sum-exp per row (softmax_row's std::log), no division in a loop. ----
using cpu::Lanes;

// `scratch` has room for max(slots, tokens) floats.
void forward_item_lanes(const float* logits, const float* valid, float* weights, float* denom,
                        int64_t slots, int64_t tokens, float eps, float* scratch) {
  constexpr int64_t kW = Lanes::kWidth;
  const int64_t full = tokens - tokens % kW;
  const float lowest = -std::numeric_limits<float>::infinity();
  const auto counts = [valid](int64_t n) { return !valid || valid[n] != 0.0f; };
  float* inv_sum = scratch;
  // Along each slot's row: e = exp(L − max) at the valid tokens, 0 elsewhere (into W's memory),
  // and inv_sum[s] = 1 / Σ e (0 when no token is valid).
  for (int64_t s = 0; s < slots; ++s) {
    const float* row = logits + s * tokens;
    float* e = weights + s * tokens;
    Lanes::V hi_v = Lanes::set1(lowest);
    for (int64_t n = 0; n < full; n += kW) {
      Lanes::V v = Lanes::loadu(row + n);
      if (valid) v = Lanes::keep_marked(Lanes::loadu(valid + n), v, Lanes::set1(lowest));
      hi_v = Lanes::max(v, hi_v);
    }
    float hi = Lanes::max_of(hi_v);
    for (int64_t n = full; n < tokens; ++n)
      if (counts(n) && row[n] > hi) hi = row[n];
    if (hi == lowest) {  // no valid token
      std::fill_n(e, tokens, 0.0f);
      inv_sum[s] = 0.0f;
      continue;
    }
    const Lanes::V shift = Lanes::set1(hi);
    Lanes::V total_v = Lanes::zero();
    for (int64_t n = 0; n < full; n += kW) {
      Lanes::V x = cpu::vector_math::exp_of(Lanes::sub(Lanes::loadu(row + n), shift));
      if (valid) x = Lanes::keep_marked(Lanes::loadu(valid + n), x, Lanes::zero());
      Lanes::storeu(e + n, x);
      total_v = Lanes::add(total_v, x);
    }
    float total = Lanes::sum(total_v);
    for (int64_t n = full; n < tokens; ++n) {
      e[n] = counts(n) ? cpu::exp_of(row[n] - hi) : 0.0f;
      total += e[n];
    }
    inv_sum[s] = 1.0f / total;
  }
  // P = e / Σ e in place, and D = eps + Σ_s P.
  std::fill_n(denom, tokens, 0.0f);
  for (int64_t s = 0; s < slots; ++s) {
    float* p = weights + s * tokens;
    const Lanes::V scale = Lanes::set1(inv_sum[s]);
    for (int64_t n = 0; n < full; n += kW) {
      const Lanes::V x = Lanes::mul(Lanes::loadu(p + n), scale);
      Lanes::storeu(p + n, x);
      Lanes::storeu(denom + n, Lanes::add(Lanes::loadu(denom + n), x));
    }
    for (int64_t n = full; n < tokens; ++n) denom[n] += (p[n] *= inv_sum[s]);
  }
  float* inv_denom = scratch;  // inv_sum is done with
  for (int64_t n = 0; n < tokens; ++n) {
    denom[n] += eps;
    inv_denom[n] = 1.0f / denom[n];
  }
  for (int64_t s = 0; s < slots; ++s) {  // W = P / D in place
    float* w = weights + s * tokens;
    for (int64_t n = 0; n < full; n += kW)
      Lanes::storeu(w + n, Lanes::mul(Lanes::loadu(w + n), Lanes::loadu(inv_denom + n)));
    for (int64_t n = full; n < tokens; ++n) w[n] *= inv_denom[n];
  }
}

// `scratch` has room for 2 · tokens floats; `slot_sums` (null: not wanted) gets each slot's row
// sum of dL.
void backward_item_lanes(const float* dweights, const float* weights, const float* denom,
                         float* dlogits, float* slot_sums, int64_t slots, int64_t tokens,
                         float* scratch) {
  constexpr int64_t kW = Lanes::kWidth;
  const int64_t full = tokens - tokens % kW;
  float* dot = scratch;  // Σ_s dW ∘ W per token
  float* inv_denom = scratch + tokens;
  std::fill_n(dot, tokens, 0.0f);
  for (int64_t s = 0; s < slots; ++s) {
    const float* dw = dweights + s * tokens;
    const float* w = weights + s * tokens;
    for (int64_t n = 0; n < full; n += kW)
      Lanes::storeu(dot + n,
                    Lanes::fmadd(Lanes::loadu(dw + n), Lanes::loadu(w + n), Lanes::loadu(dot + n)));
    for (int64_t n = full; n < tokens; ++n) dot[n] += dw[n] * w[n];
  }
  for (int64_t n = 0; n < tokens; ++n) inv_denom[n] = 1.0f / denom[n];
  // Per slot's row: dP = (dW − dot) / D into dL with Σ_n P ∘ dP on the way (P = W ∘ D), then
  // dL = P (dP − Σ) over the row, still in L1.
  for (int64_t s = 0; s < slots; ++s) {
    const float* dw = dweights + s * tokens;
    const float* w = weights + s * tokens;
    float* d = dlogits + s * tokens;
    Lanes::V along_v = Lanes::zero();
    for (int64_t n = 0; n < full; n += kW) {
      const Lanes::V dp = Lanes::mul(Lanes::sub(Lanes::loadu(dw + n), Lanes::loadu(dot + n)),
                                     Lanes::loadu(inv_denom + n));
      Lanes::storeu(d + n, dp);
      const Lanes::V p = Lanes::mul(Lanes::loadu(w + n), Lanes::loadu(denom + n));
      along_v = Lanes::fmadd(p, dp, along_v);
    }
    float along = Lanes::sum(along_v);
    for (int64_t n = full; n < tokens; ++n) {
      d[n] = (dw[n] - dot[n]) * inv_denom[n];
      along += w[n] * denom[n] * d[n];
    }
    const Lanes::V along_b = Lanes::set1(along);
    Lanes::V total_v = Lanes::zero();
    for (int64_t n = 0; n < full; n += kW) {
      const Lanes::V p = Lanes::mul(Lanes::loadu(w + n), Lanes::loadu(denom + n));
      const Lanes::V dl = Lanes::mul(p, Lanes::sub(Lanes::loadu(d + n), along_b));
      Lanes::storeu(d + n, dl);
      total_v = Lanes::add(total_v, dl);
    }
    float total = Lanes::sum(total_v);
    for (int64_t n = full; n < tokens; ++n) total += (d[n] = w[n] * denom[n] * (d[n] - along));
    if (slot_sums) slot_sums[s] = total;
  }
}
#endif

}  // namespace

void CpuBackend::token_softmax_normalize(const View& logits, const View& valid, const View& weights,
                                         const View& denom, int64_t items, int64_t groups,
                                         int64_t slots, int64_t tokens, double eps) {
  dispatch_floating(logits.dtype, "token_softmax_normalize", [&](auto tag) {
    using T = decltype(tag);
    const int64_t block = slots * tokens;
    parallel_for(items, cpu::rows_per_task(block), [&](int64_t ib, int64_t ie) {
      thread_local std::vector<float> scratch;  // the lanes' 1 / Σ e per slot, then 1 / D
      scratch.resize(static_cast<size_t>(std::max(slots, tokens)));
      for (int64_t i = ib; i < ie; ++i) {
        const T* mask = valid.data ? valid.as<T>() + (i / groups) * tokens : nullptr;
        const T* l = logits.as<T>() + i * block;
        T* w = weights.as<T>() + i * block;
        T* d = denom.as<T>() + i * tokens;
#if defined(MIXLAB_HAS_LANES)
        if constexpr (std::is_same_v<T, float>) {
          forward_item_lanes(l, mask, w, d, slots, tokens, static_cast<float>(eps), scratch.data());
          continue;
        }
#endif
        forward_item<T>(l, mask, w, d, slots, tokens, static_cast<T>(eps));
      }
    });
  });
}

void CpuBackend::token_softmax_normalize_backward(const View& dweights, const View& weights,
                                                  const View& denom, const View& dlogits,
                                                  const View& slot_sums, int64_t items,
                                                  int64_t slots, int64_t tokens) {
  dispatch_floating(dweights.dtype, "token_softmax_normalize_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t block = slots * tokens;
    parallel_for(items, cpu::rows_per_task(block), [&](int64_t ib, int64_t ie) {
      thread_local std::vector<T> scratch;  // Σ_s dW ∘ W per token (and the lanes' 1 / D)
      scratch.resize(static_cast<size_t>(2 * tokens));
      for (int64_t i = ib; i < ie; ++i) {
        const T* dw = dweights.as<T>() + i * block;
        const T* w = weights.as<T>() + i * block;
        const T* d = denom.as<T>() + i * tokens;
        T* dl = dlogits.as<T>() + i * block;
        T* sums = slot_sums.data ? slot_sums.as<T>() + i * slots : nullptr;
#if defined(MIXLAB_HAS_LANES)
        if constexpr (std::is_same_v<T, float>) {
          backward_item_lanes(dw, w, d, dl, sums, slots, tokens, scratch.data());
          continue;
        }
#endif
        backward_item<T>(dw, w, d, dl, sums, slots, tokens, scratch.data());
      }
    });
  });
}

}  // namespace mixlab
