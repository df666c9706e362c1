#include "nn/mixers/common.h"

namespace mixlab::mixers {

Tensor split_heads(const Tensor& x, int64_t heads) {
  int64_t b = x.size(0), n = x.size(1), d = x.size(2);
  return transpose(reshape(x, {b, n, heads, d / heads}), 1, 2);
}

Tensor merge_heads(const Tensor& x) {
  int64_t b = x.size(0), h = x.size(1), n = x.size(2), dh = x.size(3);
  return reshape(transpose(x, 1, 2), {b, n, h * dh});
}

namespace {
// x [W_Q; W_K; W_V]ᵀ + [b_Q; b_K; b_V]: one product (the stacked weights are a view when the
// three lie back to back in the optimizer's buffer).
Tensor stacked_qkv(const Tensor& x, const Projections& weights, const Projections& biases) {
  Tensor bias = biases[0].defined() ? concat({biases[0], biases[1], biases[2]}, 0) : Tensor();
  return linear(x, concat({weights[0], weights[1], weights[2]}, 0), bias);
}
}  // namespace

Tensor packed_self_attention(const Tensor& x, const Projections& weights, const Projections& biases,
                             int64_t heads, const Tensor& allowed, double scale,
                             const Tensor& score_bias) {
  Tensor qkv = stacked_qkv(x, weights, biases);
  return merge_heads(fused_self_attention(qkv, heads, allowed, scale, score_bias));
}

Tensor packed_self_attention_rows(const Tensor& x_rows, const TokenRows& rows, const Linear& w_q,
                                  const Linear& w_k, const Linear& w_v, int64_t heads, bool causal,
                                  double scale) {
  Tensor qkv =
      stacked_qkv(x_rows, {w_q.weight, w_k.weight, w_v.weight}, {w_q.bias, w_k.bias, w_v.bias});
  return fused_self_attention_groups(qkv, heads, rows.groups, causal, scale);
}

Tensor packed_self_attention(const Tensor& x, const Linear& w_q, const Linear& w_k,
                             const Linear& w_v, int64_t heads, const Tensor& allowed,
                             double scale) {
  return packed_self_attention(x, {w_q.weight, w_k.weight, w_v.weight},
                               {w_q.bias, w_k.bias, w_v.bias}, heads, allowed, scale);
}

Tensor masked_softmax(const Tensor& logits, const Tensor& allowed) {
  if (!allowed.defined()) return softmax(logits, -1);
  // A large finite negative (not -inf): exp underflows to exactly 0 and nothing becomes NaN.
  Tensor filled = masked_fill(logits, add(neg(allowed), 1.0), -1e30);
  // Rows with no allowed key come out uniform from softmax; zero them. The row test runs on the
  // small broadcastable mask itself (e.g. [B,1,1,M]), not on a [B,h,N,M] expansion of it.
  Tensor any_allowed = max(allowed, {-1}, true);
  return mul(softmax(filled, -1), any_allowed);
}

Tensor key_mask(const Tensor& valid) {
  if (!valid.defined()) return Tensor();
  return reshape(valid, {valid.size(0), 1, 1, valid.size(1)});
}

Tensor attention_mask(const Tensor& valid, bool causal, int64_t n, int64_t m, DType dtype,
                      Device device) {
  Tensor mask = key_mask(valid);
  if (causal) {
    Tensor tri = tril_mask(n, m, m - n, dtype, device);
    mask = mask.defined() ? mul(mask, tri) : tri;
  }
  return mask;
}

Tensor zero_invalid_rows(const Tensor& x, const Tensor& valid) {
  if (!valid.defined()) return x;
  Shape shape(x.dim(), 1);
  shape[0] = valid.size(0), shape[1] = valid.size(1);
  return masked_fill(x, reshape(add(neg(valid), 1.0), shape), 0.0);
}

Tensor pad_rows(const Tensor& x, int64_t length) {
  int64_t n = x.size(1);
  if (n == length) return x;
  Tensor zeros = Tensor::zeros({x.size(0), length - n, x.size(2)}, x.dtype(), x.device());
  return concat({x, zeros}, 1);
}

}  // namespace mixlab::mixers
