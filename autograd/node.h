// One recorded operation: the inputs it read and the rule that turns the gradient of its output
// into gradients of those inputs. Like micrograd's Value._backward, but the rule returns the
// input gradients and the engine does the `+=` accumulation.
#pragma once
#include <functional>
#include <memory>
#include <unordered_map>
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
  // Set by concat when its result is a view of leaves lying back to back in one buffer
  // (autograd/gradient_routing.h uses it; the engine does not).
  bool joins_adjacent_leaves = false;
  ~Node();  // releases long chains iteratively, never recursively
};

// Whether record() would record an op with these inputs: grad mode is on and one of them needs a
// gradient. For ops whose forward keeps extra results only a backward reads.
bool will_record(const std::vector<Tensor>& inputs);

// Records `output` as produced by `name` from `inputs` when grad mode is on and some input
// needs a gradient; the rule receives the output gradient. Returns output for chaining.
Tensor record(const char* name, Tensor output, std::vector<Tensor> inputs, BackwardFn backward);

// Runs reverse mode from `root` with upstream gradient `grad` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

// The engine's one hook for the gradient-routing optimisations (autograd/gradient_routing.h):
// told of each pass before its walk and after it, and offered every gradient on its way to a
// tensor. nullptr under set_plain_autograd(true): then the engine alone sums every gradient.
using GradientTable = std::unordered_map<Node*, Tensor>;
struct GradientRouter {
  virtual ~GradientRouter() = default;
  virtual void begin_pass(const std::vector<std::shared_ptr<Node>>& order,
                          GradientTable& grads) = 0;
  virtual void end_pass() = 0;
  // Delivers `g` to `input` (a leaf, or a node's entry in `grads`) and returns true, or returns
  // false and the engine sums it as usual.
  virtual bool deliver(const Tensor& input, const Tensor& g, GradientTable& grads) = 0;
};
GradientRouter* gradient_router();

}  // namespace mixlab
