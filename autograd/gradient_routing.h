// Gradient routing: where a gradient is written, not what it is. Each of these writes a gradient
// where it is next read instead of into a fresh tensor that the engine then copies or adds; the
// values are those of the engine's plain sums (autograd/engine.cpp) to float32 rounding. They
// reach the engine through its one hook, GradientRouter (autograd/node.h), and every function
// here falls back to the plain answer (a fresh tensor, none pending, false) under plain autograd.
#pragma once
#include "autograd/tensor.h"

namespace mixlab {

// Plain autograd turns every routing off: the engine alone sums every gradient into fresh
// tensors. Defaults to MIXLAB_PLAIN_AUTOGRAD=1 (core/settings.h); the reference that tests
// compare the routed gradients with.
bool plain_autograd();
void set_plain_autograd(bool on);

// Grad slots. For a rule: where to write the gradient of its input `input`. For a leaf that an
// optimizer gave a grad slot (its part of the flat gradient buffer) and that has no gradient yet
// in this backward pass, the slot itself: the rule's kernel writes the gradient where the
// optimizer, clipping and zeroing read it, and the engine copies nothing. Likewise for the
// result of an adjacent concat (Node::joins_adjacent_leaves) whose pieces are such leaves, used
// by nothing else in this pass, with slots back to back: the span of their slots, which that
// concat's rule then splits into the slots themselves. Otherwise, or outside a backward pass, a
// fresh tensor. Uninitialised either way: the rule writes all of it and returns it as that
// input's gradient.
// Saves: one copy of every parameter's gradient a step, and for the packed [W_Q; W_K; W_V] the
// split of the concat's gradient too (on a GPU each is a launch, and a step there is bound by
// the host's launches).
Tensor leaf_gradient_buffer(const Tensor& input, const Shape& shape, DType dtype, Device device);

// Pending gradients. For a rule whose kernel can add its gradient of `input` to another one: the
// gradient of `input` accumulated so far in this backward pass, taken out of the engine's table,
// where the rule may add to it in place (nothing else holds it or its memory; contiguous;
// `shape`, `dtype` and `device`). The rule adds its own gradient to it and returns it as that
// input's gradient. Undefined where there is none such (nothing arrived yet, a leaf, outside a
// backward pass): the rule then writes a fresh tensor, and the engine adds.
// Saves: a pre-norm block's residual stream gets its gradient twice (its layer norm and the next
// residual add); the layer norm adds its part in its own pass over the rows, so the sum is not
// written and read back once more.
Tensor take_pending_gradient(const Tensor& input, const Shape& shape, DType dtype, Device device);

// Leaf windows. For narrow's rule, where the narrowed tensor is a leaf whose gradient lives in
// its grad slot: adds `g` into the window [start, start + length) along `axis` of that gradient
// (the first gradient of the pass also zeroes the rest of the slot) and returns true; the rule
// then returns no gradient for the leaf. Values are the full-shape path's (a -0.0 in the first
// window stays -0.0 where adding a zero gave +0.0). False where the leaf has no such slot.
// Saves: gMLP's two halves of U cost three kernel calls a tensor where a full-shape gradient
// built from a copy and fills, then copied into the slot, cost six.
bool add_to_leaf_window(const Tensor& leaf, int axis, int64_t start, int64_t length,
                        const Tensor& g);

}  // namespace mixlab
