// One recorded operation: the inputs it read and the rule that turns the gradient of its output
// into gradients of those inputs. Like micrograd's Value._backward, but the rule returns the
// input gradients and the engine does the `+=` accumulation.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "autograd/tensor.h"

namespace mixlab {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  const char* name = "";
  std::vector<Tensor> inputs;  // parents in the graph (entries may not need gradients)
  BackwardFn backward;         // returns one gradient per input (undefined = none)
  ~Node();                     // releases long chains iteratively, never recursively
};

// Whether record() would record an op with these inputs: grad mode is on and one of them needs a
// gradient. For ops whose forward keeps extra results only a backward reads.
bool will_record(const std::vector<Tensor>& inputs);

// Records `output` as produced by `name` from `inputs` when grad mode is on and some input
// needs a gradient; the rule receives the output gradient. Returns output for chaining.
Tensor record(const char* name, Tensor output, std::vector<Tensor> inputs, BackwardFn backward);

// Runs reverse mode from `root` with upstream gradient `grad` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace mixlab
