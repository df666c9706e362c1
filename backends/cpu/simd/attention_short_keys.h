// The attention core for items whose row of scores fits in vector registers (m ≤ 64 keys,
// float32: four AVX-512 registers, eight AVX2 ones): the translator's heads (11-12 tokens) and
// the classifier's (49). Same results as
// cpu_attention.cpp's tiles up to float32 rounding (sums in another order); the (b, h) loop, the
// prefetching and the work split stay there, these take one item.
#pragma once
#include <cstdint>

#include "backends/cpu/attention_item.h"

namespace mixlab::cpu {

// The most keys an item may have here: four registers of 16 (AVX-512), eight of 8 (AVX2).
constexpr int64_t kMaxKeys = 64;

// Whether a float32 item of these sizes runs here: on an AVX2 or AVX-512 build, 1 ≤ m ≤ kMaxKeys,
// heads of d ≥ 1 and e ≥ 1, and a mask (if any) contiguous along the keys (col == 1).
bool short_keys_fit(int64_t m, int64_t d, int64_t e, const MaskRows<float>& mask);

// One item's forward: out [n, e] = softmax(scale·q kᵀ + bias over the allowed keys) v and each
// row's log-sum-exp (-inf and a row of zeros where no key is allowed). bias [n, m] (data null:
// none) is added to the rounded scaled scores.
void short_keys_forward(int64_t n, int64_t m, int64_t d, int64_t e, float scale, Mat<const float> q,
                        Mat<const float> k, Mat<const float> v, const MaskRows<float>& mask,
                        Mat<const float> bias, Mat<float> out, float* lse);

// Its gradients, P recomputed from q, k, the bias and lse: dq, dk and dv overwritten, and dbias
// [n, m] = dS (unscaled) where its data is not null.
void short_keys_backward(int64_t n, int64_t m, int64_t d, int64_t e, float scale,
                         Mat<const float> q, Mat<const float> k, Mat<const float> v,
                         const MaskRows<float>& mask, Mat<const float> bias, Mat<const float> out,
                         const float* lse, Mat<const float> dout, Mat<float> dq, Mat<float> dk,
                         Mat<float> dv, Mat<float> dbias);

// The synthesizers' core for one item (kernels.def, synthesized_attention): the logits given
// (not scaled), out [n, e] = softmax(logits over the allowed keys) v and each row's log-sum-exp.
// Fits where short_keys_fit(m, e, e, mask) does.
void short_keys_synthesized_forward(int64_t n, int64_t m, int64_t e, Mat<const float> logits,
                                    Mat<const float> v, const MaskRows<float>& mask, Mat<float> out,
                                    float* lse);

// Its gradients, P recomputed from the logits and lse: dlogits [n, m] and dv overwritten.
void short_keys_synthesized_backward(int64_t n, int64_t m, int64_t e, Mat<const float> logits,
                                     Mat<const float> v, const MaskRows<float>& mask,
                                     Mat<const float> out, const float* lse, Mat<const float> dout,
                                     Mat<float> dlogits, Mat<float> dv);

}  // namespace mixlab::cpu
