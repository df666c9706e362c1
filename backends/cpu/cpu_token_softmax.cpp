// External attention's memory weights (kernels.def: token_softmax_normalize), forward and
// backward side by side. Logits are [B, N, G, S] (tokens, heads, slots): one example's block is
// N rows of C = G·S columns, 49 × 256 floats (50 KB) in the classifiers, which stays in L2
// through all of the kernel's passes. Every column (a head's slot) has a softmax of its own down
// the tokens, and every row's G segments of S are normalised over the slots. The unfused chain
// (masked_fill, softmax, a multiply by the "any valid token" mask, sum_normalize) read and wrote
// the whole tensor four times each way.
//
//   forward:   P[n, c] = softmax over the valid n of L[·, c],  D[n, g] = eps + Σ_(c in g) P[n, c],
//              W[n, c] = P[n, c] / D[n, g]
//   backward:  P = W ∘ D,  dP[n, c] = (dW[n, c] − Σ_(c' in g) dW[n, c'] W[n, c']) / D[n, g],
//              dL[n, c] = P[n, c] (dP[n, c] − Σ_n' P[n', c] dP[n', c]),
//              and, when asked, Σ_n dL[n, c]: the gradient of a bias on slot c's logits (M_k's),
//              which the softmax cancels, so that the forward never adds it
//
// Every pass walks the block row after row, in address order: the softmax's sums down the
// columns are kept in a row of C accumulators (the columns are the contiguous axis, so they run
// in whole vector registers), and the sums over a row's slots are each one segment's. P is built
// in W's memory and never stored apart: the backward takes it as W ∘ D (within two roundings of
// P), which saves a stream each way and the memory of a saved [B, N, G, S] tensor.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/simd/token_softmax_lanes.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

// One example's shape: `tokens` rows of groups · slots columns.
struct Block {
  int64_t tokens, groups, slots;
  int64_t columns() const { return groups * slots; }
};

// ---- any dtype, any build: plain loops. `scratch` has room for 2 · columns. ----
template <typename T>
void forward_example(const T* logits, const T* valid, T* weights, T* denom, Block k, T eps,
                     T* scratch) {
  const int64_t cols = k.columns();
  const T lowest = -std::numeric_limits<T>::infinity();
  const auto counts = [valid](int64_t n) { return !valid || valid[n] != T(0); };
  T* hi = scratch;          // each column's largest valid logit (its shift)
  T* inv = scratch + cols;  // Σ e down each column, then its inverse
  std::fill_n(hi, cols, lowest);
  for (int64_t n = 0; n < k.tokens; ++n)
    if (counts(n))
      for (int64_t c = 0; c < cols; ++c) hi[c] = std::max(hi[c], logits[n * cols + c]);
  for (int64_t c = 0; c < cols; ++c) {
    if (hi[c] == lowest) hi[c] = 0;  // no valid token (or only -inf): e = 0 down the column
    inv[c] = 0;
  }
  for (int64_t n = 0; n < k.tokens; ++n) {
    T* e = weights + n * cols;
    for (int64_t c = 0; c < cols; ++c) {
      e[c] = counts(n) ? cpu::exp_of(logits[n * cols + c] - hi[c]) : T(0);
      inv[c] += e[c];
    }
  }
  for (int64_t c = 0; c < cols; ++c) inv[c] = inv[c] > T(0) ? T(1) / inv[c] : T(0);
  for (int64_t n = 0; n < k.tokens; ++n)
    for (int64_t g = 0; g < k.groups; ++g) {
      T* p = weights + n * cols + g * k.slots;
      const T* scale = inv + g * k.slots;
      T total = 0;
      for (int64_t s = 0; s < k.slots; ++s) total += (p[s] *= scale[s]);
      total += eps;
      denom[n * k.groups + g] = total;
      for (int64_t s = 0; s < k.slots; ++s) p[s] /= total;
    }
}

// `sums` (null: not wanted) gets each column's sum of dL.
template <typename T>
void backward_example(const T* dweights, const T* weights, const T* denom, T* dlogits, T* sums,
                      Block k, T* scratch) {
  const int64_t cols = k.columns();
  T* along = scratch;  // Σ_n P ∘ dP down each column
  std::fill_n(along, cols, T(0));
  for (int64_t n = 0; n < k.tokens; ++n)
    for (int64_t g = 0; g < k.groups; ++g) {
      const int64_t at = n * cols + g * k.slots;
      const T* dw = dweights + at;
      const T* w = weights + at;
      T* d = dlogits + at;
      const T den = denom[n * k.groups + g];
      T dot = 0;
      for (int64_t s = 0; s < k.slots; ++s) dot += dw[s] * w[s];
      for (int64_t s = 0; s < k.slots; ++s) {
        d[s] = (dw[s] - dot) / den;
        along[g * k.slots + s] += w[s] * den * d[s];
      }
    }
  if (sums) std::fill_n(sums, cols, T(0));
  for (int64_t n = 0; n < k.tokens; ++n)
    for (int64_t g = 0; g < k.groups; ++g) {
      const int64_t at = n * cols + g * k.slots, c0 = g * k.slots;
      const T den = denom[n * k.groups + g];
      T* d = dlogits + at;
      for (int64_t s = 0; s < k.slots; ++s) {
        d[s] = weights[at + s] * den * (d[s] - along[c0 + s]);
        if (sums) sums[c0 + s] += d[s];
      }
    }
}

}  // namespace

void CpuBackend::token_softmax_normalize(const View& logits, const View& valid, const View& weights,
                                         const View& denom, int64_t batch, int64_t tokens,
                                         int64_t groups, int64_t slots, double eps) {
  dispatch_floating(logits.dtype, "token_softmax_normalize", [&](auto tag) {
    using T = decltype(tag);
    const Block k{tokens, groups, slots};
    const int64_t block = tokens * k.columns();
    parallel_for(batch, cpu::rows_per_task(block), [&](int64_t b0, int64_t b1) {
      thread_local std::vector<T> scratch;  // the columns' shifts and 1 / Σ e
      scratch.resize(static_cast<size_t>(2 * k.columns()));
      for (int64_t b = b0; b < b1; ++b) {
        const T* mask = valid.data ? valid.as<T>() + b * tokens : nullptr;
        const T* l = logits.as<T>() + b * block;
        T* w = weights.as<T>() + b * block;
        T* d = denom.as<T>() + b * tokens * groups;
        if constexpr (std::is_same_v<T, float>)  // in vector registers (simd/)
          if (cpu::simd::token_softmax_forward(l, mask, w, d, k.tokens, k.groups, k.slots,
                                               static_cast<float>(eps), scratch.data()))
            continue;
        forward_example<T>(l, mask, w, d, k, static_cast<T>(eps), scratch.data());
      }
    });
  });
}

void CpuBackend::token_softmax_normalize_backward(const View& dweights, const View& weights,
                                                  const View& denom, const View& dlogits,
                                                  const View& slot_sums, int64_t batch,
                                                  int64_t tokens, int64_t groups, int64_t slots) {
  dispatch_floating(dweights.dtype, "token_softmax_normalize_backward", [&](auto tag) {
    using T = decltype(tag);
    const Block k{tokens, groups, slots};
    const int64_t block = tokens * k.columns();
    parallel_for(batch, cpu::rows_per_task(block), [&](int64_t b0, int64_t b1) {
      thread_local std::vector<T> scratch;  // Σ_n P ∘ dP down each column
      scratch.resize(static_cast<size_t>(k.columns()));
      for (int64_t b = b0; b < b1; ++b) {
        const T* dw = dweights.as<T>() + b * block;
        const T* w = weights.as<T>() + b * block;
        const T* d = denom.as<T>() + b * tokens * groups;
        T* dl = dlogits.as<T>() + b * block;
        T* sums = slot_sums.data ? slot_sums.as<T>() + b * k.columns() : nullptr;
        if constexpr (std::is_same_v<T, float>)
          if (cpu::simd::token_softmax_backward(dw, w, d, dl, sums, k.tokens, k.groups, k.slots,
                                                scratch.data()))
            continue;
        backward_example<T>(dw, w, d, dl, sums, k, scratch.data());
      }
    });
  });
}

}  // namespace mixlab
