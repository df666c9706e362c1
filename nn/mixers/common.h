// Pieces several mixers share: head splitting, the masked softmax of §0's masking rule and the
// attention core (fused, or from one packed q, k, v product).
#pragma once
#include <array>

#include "autograd/ops.h"
#include "nn/attention_core.h"
#include "nn/layers.h"
#include "nn/mixer.h"
#include "nn/mixing_capture.h"

namespace mixlab::mixers {

// [B, N, h·d_h] -> [B, h, N, d_h] (head k owns channels [k·d_h, (k+1)·d_h)).
Tensor split_heads(const Tensor& x, int64_t heads);
// [B, h, N, d_h] -> [B, N, h·d_h].
Tensor merge_heads(const Tensor& x);

// softmax over the last axis where `allowed` (broadcastable, 1 = key allowed, 0 = masked) is 1.
// Masked keys get weight exactly 0; a row whose keys are all masked gets weights exactly 0
// (never NaN, never uniform), as §0 requires.
Tensor masked_softmax(const Tensor& logits, const Tensor& allowed);

// The attention core softmax(scale · q kᵀ + M) v of q [B, h, N, d], k [B, h, M, d], v [B, h, M, e]
// with `allowed` as masked_softmax takes it: [B, h, N, e]. It runs fused (fused_attention: one
// kernel per (batch, head), no [B, h, N, M] probabilities kept) unless math_attention() (the
// Math core chosen, nn/attention_core.h, or a mixing recorder active: `mixlab inspect`), when it
// forms the probabilities on the equation's path and hands them to on_probabilities (which
// records them, if a recorder is active) first. Both paths agree within float32 rounding.
// `bias`, when defined (broadcastable to [B, h, N, M]), is added to the scaled scores:
// softmax(scale · q kᵀ + bias + M) v (attention's relative position bias, §2).
template <typename OnProbabilities>
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed,
              double scale, OnProbabilities&& on_probabilities, const Tensor& bias = Tensor()) {
  if (!math_attention()) return fused_attention(q, k, v, allowed, scale, bias);
  Tensor scores = mul(matmul(q, transpose(k, -1, -2)), scale);
  Tensor a = masked_softmax(bias.defined() ? add(scores, bias) : scores, allowed);
  on_probabilities(a);
  return matmul(a, v);
}

// Self-attention's core with q, k and v from one product: the three projections' weights (and
// biases, when they have them) stacked, the result read in place by fused_self_attention. Its
// gradient comes back as one buffer, so the backward is one product for dX (not three whose
// results are added) and one for the stacked weights. Returns the heads merged, [B, N, h·d_h].
// The fused path only: a mixing recorder needs attend()'s unfused one.
Tensor packed_self_attention(const Tensor& x, const Linear& w_q, const Linear& w_k,
                             const Linear& w_v, int64_t heads, const Tensor& allowed, double scale);
// The same from the three weights and biases as tensors (biases all undefined, or all defined),
// with an optional bias on the scores (fused_attention's): the synthesizers' mixtures, whose W_Q
// carries the mixture weight.
using Projections = std::array<Tensor, 3>;  // Q, K, V
Tensor packed_self_attention(const Tensor& x, const Projections& weights, const Projections& biases,
                             int64_t heads, const Tensor& allowed, double scale,
                             const Tensor& score_bias = Tensor());

// packed_self_attention on the real tokens' rows x_rows [R, d] (nn/token_rows.h), padding
// nowhere: the product runs on the R rows and the core on the rows' groups of equal-length
// sequences (fused_self_attention_groups), each sequence seeing its own keys (causally or not).
// Returns [R, h·d_h].
Tensor packed_self_attention_rows(const Tensor& x_rows, const TokenRows& rows, const Linear& w_q,
                                  const Linear& w_k, const Linear& w_v, int64_t heads, bool causal,
                                  double scale);

// The [B, 1, 1, M] key mask from a [B, M] valid mask (undefined stays undefined).
Tensor key_mask(const Tensor& valid);
// Combines key validity [B,1,1,M] and, when causal, the [N, M] lower-triangular mask (query i
// sees keys j <= i + (M - N), so a query block at the end of the keys works for decoding).
// Returns an undefined tensor when nothing is masked.
Tensor attention_mask(const Tensor& valid, bool causal, int64_t n, int64_t m, DType dtype,
                      Device device);

// x [B, N, ...] with the rows at invalid positions (valid [B, N] == 0) set to exactly 0 (selected,
// not multiplied, so non-finite padding cannot leak); an undefined valid returns x unchanged.
// Zeroing rows of X before a token-mixing matrix equals zeroing that matrix's invalid columns.
Tensor zero_invalid_rows(const Tensor& x, const Tensor& valid);
// x [B, N, d] followed by `length` - N zero rows: [B, length, d] (x itself when N == length).
Tensor pad_rows(const Tensor& x, int64_t length);

}  // namespace mixlab::mixers
