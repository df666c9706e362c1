// Gradient utilities: the global gradient norm, clipping by it, and scaling.
//
// Everything runs as ops on the gradients' own device under NoGradGuard: one squared-sum
// reduction per tensor, the partial sums added on the device, and at most a single scalar
// copied to the host at the end (none for the *_tensor forms, so a GPU step never waits).
//
// The flat path: when every parameter's gradient sits in its slot of an optimizer's flat gradient
// buffer (train/optimizer.h) and together they tile one contiguous range, the norm is ONE
// squared-sum reduction over that range and the scale ONE in-place pass over it. The slots are
// the optimizer's own memory, one per parameter, so scaling them in place is safe. The flat norm
// adds the squares in a different order than the per-tensor one (in float64 partial sums over
// large ranges), so the two agree to float rounding, not bit for bit.
//
// Otherwise gradients are replaced, never scaled in place: backward() may hand the very same
// gradient tensor to two leaves (the two inputs of an add, say), and an in-place scale would then
// hit that storage twice.
//
// Gradient accumulation over micro-batches (an effective batch of k·b with the memory of b):
//
//   optimizer.zero_grad();
//   for (int i = 0; i < k; ++i) {
//     Tensor loss = cross_entropy(model(x[i]), y[i]);  // mean over micro-batch i
//     (loss * (1.0 / k)).backward();                     // grads add up across the k calls
//   }
//   clip_grad_norm(params, max_norm);                    // optional, on the accumulated grads
//   optimizer.step();
//
// backward() adds into existing .grad, so after k calls each grad is the sum of the k scaled
// micro-batch gradients, i.e. the gradient of the mean loss over all k·b examples when the
// micro-batches have equal size (tests/test_optim.cpp checks this to 1e-6). With unequal sizes
// b_i (a last partial batch), scale micro-batch i by b_i / Σb instead of 1/k. Losses that are a
// mean over tokens (padding ignored) need the token counts as weights in the same way.
#pragma once
#include <vector>

#include "autograd/tensor.h"

namespace mixlab {

// sqrt(Σ over parameters with a gradient of Σ g²); 0 when no parameter has one. Partial sums
// are accumulated across tensors in float64. Reads the norm back to the host (on a GPU: waits
// for the gradients).
double grad_norm(const std::vector<Tensor>& params);
// The same norm as a 0-d tensor on the gradients' device (float64 where the device has it),
// nothing read back.
Tensor grad_norm_tensor(const std::vector<Tensor>& params);

// torch.nn.utils.clip_grad_norm_: with total = grad_norm(params), when total > max_norm every
// gradient is multiplied by max_norm / (total + 1e-6). Returns total, measured before clipping.
// A non-finite total (an overflow or NaN somewhere) leaves the gradients as they are and is
// returned, so the caller can skip the step; max_norm must be > 0.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The same clipping without a device-to-host read (what the trainer calls): the factor is
// computed on the device from the norm (UnaryOp::ClipCoef) and applied by one in-place multiply
// over the flat buffer, so a GPU step queues it and goes on. Returns the norm as
// grad_norm_tensor() does; the gradients end bit for bit as clip_grad_norm() leaves them.
Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm);

// Multiplies every existing gradient by `factor` (new tensors; see above), a number or a
// one-element tensor on the gradients' device (cast to each gradient's dtype).
void scale_grads(const std::vector<Tensor>& params, double factor);
void scale_grads(const std::vector<Tensor>& params, const Tensor& factor);

}  // namespace mixlab
