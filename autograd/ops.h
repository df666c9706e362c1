// Every differentiable operation of the engine. Each one computes its result with the backend
// of its inputs' device and, when gradients are needed, records its backward rule beside it
// (autograd/ops/<family>.cpp holds forward and backward of one family together).
//
// Semantics follow PyTorch/NumPy: broadcasting for elementwise ops, matmul batching, axes may
// be negative. Errors name the op and every shape involved.
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace mixlab {

// ---- elementwise (autograd/ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor abs(const Tensor& x);
Tensor relu(const Tensor& x);
enum class GeluForm { Erf, Tanh };
Tensor gelu(const Tensor& x, GeluForm form = GeluForm::Erf);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sin(const Tensor& x);       // its gradient is cos(x)
Tensor cos(const Tensor& x);       // its gradient is −sin(x)
Tensor softplus(const Tensor& x);  // log(1 + exp(x)); its gradient is sigmoid(x)
Tensor elu_plus_one(
    const Tensor& x);  // elu(x) + 1: x + 1 above 0, exp(x) below (linear attention's φ)
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient to the larger (ties: first)
// cond (any dtype; nonzero = true) selects a, else b; all broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x where mask is 0, `value` where mask is nonzero (mask broadcast to x).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Rows of x along its first axis: out[i] = x[index[i]] (int32 index; repeats allowed). Built
// on the embedding gather, so its gradient scatter-adds back.
Tensor select_rows(const Tensor& x, const Tensor& index);
// Rows of x by a partial permutation: out[i] = x[take[i]], a row of zeros where take[i] is -1
// (int32 take [T] into [0, x.size(0)), no value twice). `put` [x.size(0)] is its inverse: put[j]
// is the i with take[i] == j, or -1 where no row takes j. The gradient is the same gather the
// other way, take_rows(grad, put, take). The models pack a padded batch's real tokens with it and
// place them back (nn/token_rows.h): one pass of copies each way, and no zero-fill or scatter.
// `checked` false skips the index checks (a kernel each on a GPU) for indices the caller built
// and vouches for (token_rows).
Tensor take_rows(const Tensor& x, const Tensor& take, const Tensor& put, bool checked = true);
// Not differentiable: 1.0 where the relation holds, else 0.0, in a's dtype.
Tensor equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return add(a, -b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, double b) { return mul(a, 1.0 / b); }

// ---- shapes and views (autograd/ops/shape_ops.cpp) ----
Tensor reshape(const Tensor& x, Shape shape);  // one -1 allowed; a view when strides allow
Tensor transpose(const Tensor& x, int64_t axis0, int64_t axis1);    // a view
Tensor permute(const Tensor& x, const std::vector<int64_t>& axes);  // a view
// Elements [start, start+length) along axis: a view (slice / narrow).
Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end);
Tensor expand(const Tensor& x, const Shape& shape);  // broadcast view (stride 0)
Tensor unsqueeze(const Tensor& x, int64_t axis);
Tensor squeeze(const Tensor& x, int64_t axis);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);  // always a fresh contiguous copy
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis);
Tensor stack(const std::vector<Tensor>& xs, int64_t axis);
Tensor to_device(const Tensor& x, Device device);
Tensor cast(const Tensor& x, DType dtype);
// Sums broadcast axes of `grad` away so that it has `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- reductions (autograd/ops/reduce.cpp) ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);
Tensor sum(const Tensor& x);  // all elements, a 0-d tensor
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);
Tensor mean(const Tensor& x);
// Maximum over axes; the gradient goes to the maximal entries (split evenly on ties).
Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);

// ---- products (autograd/ops/matmul.cpp) ----
// PyTorch's matmul for operands of at least 2 dims: batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// y = x Wᵀ + b with W stored [out, in] (torch.nn.Linear's layout); bias may be undefined.
// (autograd/ops/linear.cpp: the bias is added in one pass over the product.)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// ---- normalisation and probabilities (softmax.cpp, layer_norm.cpp) ----
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
// Over the last axis; gamma and beta ([cols]) may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5);
// log sum_{i' <= i} exp(x[i']) along `axis` (the prefix softmax of causal external attention).
Tensor logcumsumexp(const Tensor& x, int64_t axis);

// ---- lookup, noise and losses (embedding.cpp, dropout.cpp, cross_entropy.cpp) ----
// table [vocab, dim], indices int32 of any shape -> [indices..., dim]. Out-of-range ids throw.
Tensor embedding(const Tensor& table, const Tensor& indices);
// Zeroes each element with probability p and scales the rest by 1/(1-p); identity when
// !training or p == 0. The mask comes from `seed` (counter-based: identical on every device).
Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed);
// Mean over non-ignored rows of the cross-entropy between logits [..., C] and int32 targets
// [...], with label smoothing eps: the target distribution is (1-eps)·onehot + eps/C.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// ---- Fourier transforms (autograd/ops/fft.cpp) ----
// Complex DFT along `axis` of x [..., 2] holding (real, imaginary) pairs in its last axis.
Tensor fft(const Tensor& x, int64_t axis, bool inverse = false);
// Re(DFT2(x)) over the last two axes [..., n, d] (FNet's mixing). With `lengths` (int32, one per
// leading item), item b is transformed at its own length and rows >= lengths[b] are 0.
Tensor fft2_real(const Tensor& x, const Tensor& lengths = Tensor());
// The circular convolution along the tokens of x [B, N, d] with a per-channel kernel [L, d],
// L ≥ 2N − 1: y[b, i, c] = Σ_{j<N} kernel[(i − j) mod L, c] · x[b, j, c] (by FFT on the CPU
// and GPU). The long convolutions of s4d and hyena (nn/mixers/long_conv.h).
Tensor circular_conv(const Tensor& x, const Tensor& kernel);

// ---- masks (autograd/ops/masks.cpp; constants, not differentiable) ----
// [n, m] with 1 where j <= i + diagonal, else 0 (numpy.tril of ones).
Tensor tril_mask(int64_t n, int64_t m, int64_t diagonal = 0, DType dtype = DType::F32,
                 Device device = Device::cpu());
// [batch, n] valid mask: 1 where position < lengths[b].
Tensor length_mask(const std::vector<int32_t>& lengths, int64_t n, DType dtype = DType::F32,
                   Device device = Device::cpu());

// ---- the attention core (autograd/ops/attention.cpp) ----
// softmax(scale · q kᵀ + M) v for each (batch, head) in one kernel: q [B, H, N, D], k [B, H, M, D],
// v [B, H, M, E] -> [B, H, N, E]. `allowed` (may be undefined: nothing masked) is 0/1, of q's
// dtype, broadcastable to [B, H, N, M]: key j is seen by query i where it is 1. Equals
// matmul(mixers::masked_softmax(mul(matmul(q, kᵀ), scale), allowed), v) (a query with no allowed
// key gets 0) within rounding, without forming the [B, H, N, M] probabilities: the backward
// recomputes them from the saved per-row log-sum-exp. The result is a [B, H, N, E] view of a
// [B, N, H, E] buffer, so merging the heads after it is free.
// `bias` (may be undefined), broadcastable to [B, H, N, M], is added to the scaled scores before
// the mask and softmax: softmax(scale·q kᵀ + bias) over the allowed keys, as PyTorch's
// scaled_dot_product_attention takes a float attn_mask; it gets a gradient (dS, summed over the
// axes it was broadcast along). Relative-position biases, or another mixer's logits (the
// synthesizers' mixtures with a dot-product component, mixers.md §3).
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed,
                       double scale, const Tensor& bias = Tensor());
// Self-attention from one projection: qkv [B, N, 3·H·D] holds Q, K and V side by side (X W_qkvᵀ
// with W_qkv the three weights stacked), each split into H heads of D; equals fused_attention of
// its three [B, H, N, D] parts, read in place. Its gradient is one [B, N, 3·H·D] buffer, the three
// parts' gradients written side by side, so the projection's backward is one product each way.
// `bias` as fused_attention's.
Tensor fused_self_attention(const Tensor& qkv, int64_t heads, const Tensor& allowed, double scale,
                            const Tensor& bias = Tensor());
// Self-attention over sequences packed back to back with no padding (nn/token_rows.h): qkv
// [R, 3·H·D] as fused_self_attention's, its rows `groups` of sequences in turn, group g being
// count_g sequences of length_g rows each (Σ count_g · length_g = R). Each sequence attends to
// its own rows only, causally or not; one kernel call per group, each reading its rows in place
// as fused_self_attention reads a [count_g, length_g, 3·H·D] batch. Returns [R, H·D], the heads
// merged. Equals fused_self_attention on the padded batch (padded keys masked) at the real rows.
struct SequenceGroup {
  int64_t count = 0, length = 0;
};
Tensor fused_self_attention_groups(const Tensor& qkv, int64_t heads,
                                   const std::vector<SequenceGroup>& groups, bool causal,
                                   double scale);
// Cross-attention over packed rows (nn/token_rows.h): q [Rq, H·D] holds the queries and k
// [Rk, H·D], v [Rk, H·E] the keys and values of the same sequences in the same order, `groups`
// of sequences in turn, group g being count_g sequences of query_length_g query rows and
// key_length_g key rows. Each query sees its own sequence's keys, every one of them (no mask);
// one kernel call per group. A query with no key gets 0. Returns [Rq, H·E], the heads merged.
struct CrossGroup {
  int64_t count = 0, query_length = 0, key_length = 0;
};
Tensor fused_attention_groups(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                              const std::vector<CrossGroup>& groups, double scale);
// The synthesizers' core (mixers.md §3): softmax(L + M) v per (batch, head) in one kernel, the
// logits L [B or 1, H, N, M] given (not scaled; [1, H, N, M]: the same logits for every example,
// their gradient summed over the batch), v [B, H, M, E] -> [B, H, N, E], `allowed` as
// fused_attention's. Equals matmul(mixers::masked_softmax(L, allowed), v) within rounding,
// without forming the probabilities: the backward recomputes them from L and each row's saved
// log-sum-exp. The result is a [B, H, N, E] view of a [B, N, H, E] buffer, as fused_attention's.
Tensor fused_synthesized_attention(const Tensor& logits, const Tensor& v, const Tensor& allowed);
// Linear attention's core without a causal mask (mixers.md, linear-attention): q = φ(Q)
// [B, H, N, D], k = φ(K) [B, H, M, D], v [B, H, M, E] -> (q (kᵀ v)) / (q Σ_j k_j + eps), [B, H, N,
// E], one kernel each way per (batch, head), kᵀ v and Σ_j k_j formed again in the backward.
// Equals div(matmul(q, matmul(kᵀ, v)), add(matmul(q, sum(k, {2}, true)ᵀ), eps)) within
// rounding. The result is a [B, H, N, E] view of a [B, N, H, E] buffer, as fused_attention's.
Tensor fused_linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, double eps);
// ---- the depthwise token convolution of lightconv/dynconv (autograd/ops/token_conv.cpp) ----
// out[b, t, c] = Σ_{m<K} taps[b|0, t|0, ⌊c / (d/H)⌋, m] · g[b, t + m − left, c], g read as 0
// outside the sequence: g [B, N, d], taps [B or 1, N or 1, H, K] (per item and position, or
// shared), H dividing d, 0 ≤ left < K (causal: K − 1; centred: K / 2). One kernel each way,
// without padded or stacked copies of g; gradients for g and taps.
Tensor token_conv(const Tensor& g, const Tensor& taps, int64_t left);
// ---- the selective scan of mamba (autograd/ops/selective_scan.cpp; mixers.md §17) ----
// y [batch, N, E] from u, delta [batch, N, E], A [E, n], B, C [batch, N, n], D [E]: for each
// item and channel c, h_i[c, k] = exp(Δ_i[c] A[c, k]) h_{i−1}[c, k] + Δ_i[c] B_i[k] u_i[c]
// (h_{−1} = 0), y_i[c] = Σ_k C_i[k] h_i[c, k] + D[c] u_i[c]. One kernel each way (the backward
// a reverse scan), without forming the states of every token; gradients for all six inputs.
Tensor selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& B,
                      const Tensor& C, const Tensor& D);
// ---- fused ops (autograd/ops/linear.cpp, residual.cpp, scale_shift.cpp): one kernel pass where
// the unfused ops made several, with the same numbers ----
// x * scale + shift along the last axis (scale, shift [cols]; shift may be undefined: x * scale)
// in one pass, its backward (dx and the column sums for scale and shift) in one pass too.
// ResMLP's affine map and LayerScale.
Tensor scale_shift(const Tensor& x, const Tensor& scale, const Tensor& shift);
// GLU(a‖b) = a ⊙ σ(b) with x = a‖b split in half along its last axis (autograd/ops/glu.cpp): one
// kernel each way, the numbers of mul(a, sigmoid(b)).
Tensor glu(const Tensor& x);
// Batched outer products (autograd/ops/outer_product.cpp): a [..., p], b [..., q] with the same
// leading axes -> [..., p, q], out[..., u, v] = a[..., u] · b[..., v]; one kernel each way
// (equals mul(unsqueeze(a, -1), unsqueeze(b, -2))). The factorized dense synthesizer's logits.
Tensor outer_product(const Tensor& a, const Tensor& b);
// x / (eps + sum(x, {axis}, true)): x normalised to sum 1 along `axis` (autograd/ops/
// sum_normalize.cpp), one kernel each way. External attention's double normalisation.
Tensor sum_normalize(const Tensor& x, int64_t axis, double eps);
// External attention's memory weights (autograd/ops/token_softmax_normalize.cpp): for logits
// [B, tokens, ..., slots] plus slot_bias [slots] (optional) on every token's row, the softmax
// over the tokens (axis 1) `valid` marks ([B, tokens], 0/1 in the logits' dtype; undefined: every
// token), per slot and head, then each token's weights normalised to sum 1 over the slots,
// W = P / (eps + Σ_slots P). One kernel each way; equals
// sum_normalize(softmax(masked_fill(logits + slot_bias, invalid tokens, -inf), 1) ⊙ valid, -1,
// eps).
Tensor token_softmax_normalize(const Tensor& logits, const Tensor& slot_bias, const Tensor& valid,
                               double eps);
// The same, its result written over the logits' memory where no other tensor shares it (logits
// an rvalue: nothing reads them after this call), else into fresh memory. Same values.
Tensor token_softmax_normalize(Tensor&& logits, const Tensor& slot_bias, const Tensor& valid,
                               double eps);
// gMLP's spatial gate (autograd/ops/spatial_gate.cpp): z ⊙ (g + bias[t]) for g, z [..., N, C]
// and bias [N], one kernel each way; equals mul(add(g, reshape(bias, {N, 1})), z).
Tensor spatial_gate(const Tensor& g, const Tensor& bias, const Tensor& z);
// x + bias along the last axis (bias [cols]) in one row pass.
Tensor bias_add(const Tensor& x, const Tensor& bias);
// gelu(x + bias) (erf form) in one pass; the backward yields dGELU and the bias gradient (column
// sums) in one pass too.
Tensor bias_gelu(const Tensor& x, const Tensor& bias);
// gelu(linear(x, weight, bias)), the bias and GELU applied in one pass over the product's output
// (the FFN's first layer). bias may be undefined (then gelu(x Wᵀ)).
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias);
// linear(gelu(linear(x, w1, b1)), w2, b2): the transformer's position-wise feed-forward, both
// products with their bias (and GELU) in the product's epilogue; the backward gets GELU's
// gradient in the epilogue of dy·W₂ (no separate pass over the hidden layer's gradient).
Tensor feed_forward(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                    const Tensor& b2);
// The residual branch of a block: sum = x + dropout(h, p, seed) (p = 0: x + h; the caller folds
// the training flag into p), and normed = layer_norm(sum, gamma, beta, eps), both from one row
// kernel that draws the dropout mask itself (the same mask as dropout(h, p, true, seed)).
struct ResidualNorm {
  Tensor sum, normed;
};
ResidualNorm add_dropout_layer_norm(const Tensor& x, const Tensor& h, double p, uint64_t seed,
                                    const Tensor& gamma, const Tensor& beta, double eps = 1e-5);
// sum = x + dropout(h, p, seed) alone, in one pass.
Tensor add_dropout(const Tensor& x, const Tensor& h, double p, uint64_t seed);

}  // namespace mixlab
