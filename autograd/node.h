// One recorded operation: the inputs it read and the rule that turns the gradient of its output
// into gradients of those inputs. Like micrograd's Value._backward, but the rule returns the
// input gradients and the engine does the `+=` accumulation (or the rule's kernel does, into a
// gradient it took from the engine: take_pending_gradient below).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "autograd/tensor.h"

namespace mixlab {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  const char* name = "";
  // Parents in the graph (entries may not need gradients). A parent an op made is held as its
  // place in the graph only (shape and grad_fn, no memory: engine.cpp, record); leaves whole.
  std::vector<Tensor> inputs;
  BackwardFn backward;  // returns one gradient per input (undefined = none)
  ~Node();              // releases long chains iteratively, never recursively
};

// Whether record() would record an op with these inputs: grad mode is on and one of them needs a
// gradient. For ops whose forward keeps extra results only a backward reads.
bool will_record(const std::vector<Tensor>& inputs);

// Records `output` as produced by `name` from `inputs` when grad mode is on and some input
// needs a gradient; the rule receives the output gradient. Returns output for chaining.
Tensor record(const char* name, Tensor output, std::vector<Tensor> inputs, BackwardFn backward);

// For a rule: where to write the gradient of its input `input`. For a leaf that an optimizer gave
// a grad slot (its part of the flat gradient buffer) and that has no gradient yet in this
// backward pass, the slot itself: the rule's kernel writes the gradient where the optimizer,
// clipping and zeroing read it, and the engine copies nothing (on a GPU a copy is a launch, and
// the step is bound by the host's launches). Likewise for the result of an adjacent concat
// (kAdjacentConcat) whose pieces are such leaves, used by nothing else in this pass, with slots
// back to back: the span of their slots, which that concat's rule then splits into the slots
// themselves. Otherwise, or outside a backward pass, a fresh tensor. Uninitialised either way:
// the rule writes all of it and returns it as that input's gradient. The values are those a
// fresh tensor would get: only where the gradient lands changes.
Tensor leaf_gradient_buffer(const Tensor& input, const Shape& shape, DType dtype, Device device);

// For a rule whose kernel can add its gradient of `input` to another one: the gradient of `input`
// accumulated so far in this backward pass, taken out of the engine's table, where the rule may
// add to it in place (nothing else holds it or its memory; contiguous; `shape`, `dtype` and
// `device`). The rule adds its own gradient to it (pending + own, the engine's addition) and
// returns it as that input's gradient. Undefined where there is none such (nothing arrived yet, a
// leaf, outside a backward pass): the rule then writes a fresh tensor, and the engine adds. A
// pre-norm block's residual stream feeds both its layer norm and the next residual add, so its
// gradient arrives twice: the layer norm's backward adds its part in its own pass over the rows,
// and the sum is not written and read back once more (layer_norm.cpp).
Tensor take_pending_gradient(const Tensor& input, const Shape& shape, DType dtype, Device device);

// For narrow's rule, where the narrowed tensor is a leaf whose gradient lives in its grad slot:
// adds `g` into the window [start, start + length) along `axis` of that gradient (the first
// gradient of the pass also zeroes the rest of the slot) and returns true; the rule then returns
// no gradient for the leaf. This replaces a gradient of the leaf's full shape built from a copy
// and fills, then copied or added into the slot (for gMLP's two halves of U: three kernel calls a
// tensor where there were six). Values are the full-shape path's (a -0.0 in the first window
// stays -0.0 where adding a zero gave +0.0). False where the leaf has no such slot.
bool add_to_leaf_window(const Tensor& leaf, int axis, int64_t start, int64_t length,
                        const Tensor& g);

// The name of concat's node when its pieces are parameters lying back to back in one buffer, in
// order, joined along the first axis, so that its result is a view of them
// (autograd/ops/shape_ops.cpp): the packed projection [W_Q; W_K; W_V] an optimizer laid out.
inline constexpr const char* kAdjacentConcat = "concat (adjacent pieces, a view)";

// Runs reverse mode from `root` with upstream gradient `grad` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace mixlab
