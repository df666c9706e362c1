// The backward engine: an iterative topological sort of the recorded graph, then one walk in
// reverse order that calls each node's rule and sums the gradients flowing into each tensor.
// The optimisations that choose where a gradient is written live in gradient_routing.cpp and
// reach this walk only through the GradientRouter hook (node.h).
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace mixlab {

namespace {
// grad(input) += g: into the table for a tensor an op made, into .grad for a leaf. Sums go into
// a fresh tensor, never in place: someone else may still hold the gradient.
void accumulate_gradient(GradientRouter* router, const Tensor& input, const Tensor& g,
                         GradientTable& grads) {
  if (router && router->deliver(input, g, grads)) return;
  if (input.grad_fn()) {
    Tensor& sum = grads[input.grad_fn().get()];
    sum = sum.defined() ? add(sum, g) : g;
  } else {
    input.set_grad(contiguous(input.grad().defined() ? add(input.grad(), g) : g));
  }
}
}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  check(root.requires_grad(),
        "backward: the tensor does not require grad (no recorded op and "
        "requires_grad not set)");
  Tensor grad = grad_in;
  if (!grad.defined()) {
    check(root.numel() == 1, "backward: implicit gradient only for a single-element tensor; got ",
          shape_str(root.shape()), ". Pass the upstream gradient explicitly.");
    grad = Tensor::ones(root.shape(), root.dtype(), root.device());
  }
  check(grad.shape() == root.shape(), "backward: gradient shape ", shape_str(grad.shape()),
        " differs from tensor shape ", shape_str(root.shape()));
  NoGradGuard no_grad;
  GradientRouter* router = gradient_router();
  GradientTable grads;
  if (root.is_leaf()) return accumulate_gradient(router, root, grad, grads);

  // Topological order (each node after every node it reads) by a depth-first walk without
  // recursion. Nodes are held by shared_ptr: freeing a node's inputs may drop the last other owner.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> visited{root.grad_fn().get()};
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root.grad_fn(), 0}};
  while (!stack.empty()) {
    auto& [node, next_input] = stack.back();
    if (next_input < node->inputs.size()) {
      const Tensor& in = node->inputs[next_input++];
      if (in.defined() && in.grad_fn() && visited.insert(in.grad_fn().get()).second)
        stack.push_back({in.grad_fn(), 0});
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }

  // The walk: from the root back to the leaves, each node's rule turns its output's summed
  // gradient into its inputs' gradients.
  grads[root.grad_fn().get()] = grad;
  if (router) router->begin_pass(order, grads);
  struct EndPass {
    GradientRouter* router;
    ~EndPass() {
      if (router) router->end_pass();
    }
  } end_pass{router};
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = it->get();
    check(static_cast<bool>(node->backward), "backward: the graph through '", node->name,
          "' was already freed by an earlier backward(); pass retain_graph=true to keep it");
    Tensor g = std::move(grads[node]);
    grads.erase(node);
    if (!g.defined()) continue;
    std::vector<Tensor> input_grads = node->backward(g);
    for (size_t i = 0; i < node->inputs.size() && i < input_grads.size(); ++i) {
      const Tensor& in = node->inputs[i];
      const Tensor& gi = input_grads[i];
      if (!in.defined() || !gi.defined() || !in.requires_grad()) continue;
      check(gi.shape() == in.shape(), "backward of '", node->name, "': gradient ",
            shape_str(gi.shape()), " for input ", i, " of shape ", shape_str(in.shape()));
      accumulate_gradient(router, in, gi, grads);
    }
    if (!retain_graph) {  // free what backward no longer needs, as soon as it is used
      node->backward = nullptr;
      node->inputs.clear();
    }
  }
}

}  // namespace mixlab
