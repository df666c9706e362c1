// The backward engine: an iterative topological sort of the recorded graph, then one walk in
// reverse order that calls each node's rule and sums the gradients flowing into each tensor.
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace mixlab {

namespace {
thread_local bool g_grad_enabled = true;

// Gradients arriving at a tensor from several consumers are summed into a fresh tensor: never an
// in-place update of a gradient that someone else may still hold (accumulate_into below adds in
// place only where nothing else can).
Tensor accumulate(const Tensor& current, const Tensor& incoming) {
  if (!current.defined()) return incoming;
  return add(current, incoming);
}

// sum += incoming where sum is (add()'s float additions, its memory reused). Same shape, dtype,
// device; sum contiguous and held by the caller alone.
void add_in_place(const Tensor& sum, const Tensor& incoming) {
  if (sum.numel() > 0)
    backend_for(sum.device()).binary(BinaryOp::Add, sum.view(), incoming.view(), sum.view());
}

// The same sum for an entry of the engine's own table: when nothing else holds the entry's
// memory (not a rule's saved tensor, not another input's gradient, not a view of either), the
// incoming gradient is added where the entry is (the same float additions as add()'s), instead
// of into a fresh tensor: no new buffer to write (a residual stream's gradient, once per block).
void accumulate_into(Tensor& slot, const Tensor& incoming) {
  if (slot.sole_owner() && slot.is_contiguous() && slot.shape() == incoming.shape() &&
      slot.dtype() == incoming.dtype() && slot.device() == incoming.device()) {
    add_in_place(slot, incoming);
    return;
  }
  slot = accumulate(slot, incoming);
}

// A leaf's gradient. With a grad slot (a view into an optimizer's flat gradient buffer) the first
// gradient is copied into the slot and later ones are added there in place, so every gradient
// stays in the one buffer the optimizer, clipping and zeroing sweep in single passes; the sums
// are the same float additions as add()'s. The slot is the optimizer's own memory, so no other
// holder sees it change except through .grad. Without a slot (or when the gradient was replaced
// by hand, or the parameter moved) a fresh tensor holds the sum, as always.
void accumulate_leaf(const Tensor& leaf, const Tensor& incoming) {
  TensorImpl& impl = leaf.impl();
  if (impl.grad_slot && (!impl.grad || impl.grad == impl.grad_slot)) {
    Tensor slot(impl.grad_slot);
    if (slot.shape() == incoming.shape() && slot.dtype() == incoming.dtype() &&
        slot.device() == incoming.device()) {
      if (!impl.grad) {
        slot.copy_(incoming);
        impl.grad = impl.grad_slot;
      } else {
        add_in_place(slot, incoming);
      }
      return;
    }
  }
  leaf.set_grad(contiguous(accumulate(leaf.grad(), incoming)));
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

Node::~Node() {
  // Destroying a 10,000-op chain recursively would overflow the stack: move every node that
  // only we hold onto an explicit stack and release it there.
  std::vector<std::shared_ptr<Node>> pending;
  auto take_parents = [&pending](std::vector<Tensor>& inputs) {
    for (Tensor& t : inputs) {
      if (!t.defined()) continue;
      const auto& impl = t.impl_ptr();
      if (impl.use_count() == 1 && impl->grad_fn && impl->grad_fn.use_count() == 1)
        pending.push_back(std::move(impl->grad_fn));
    }
    inputs.clear();
  };
  backward = nullptr;  // the rule's captures may hold parents too
  take_parents(inputs);
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    node->backward = nullptr;
    take_parents(node->inputs);
  }
}

bool will_record(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor record(const char* name, Tensor output, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!will_record(inputs)) return output;
  auto node = std::make_shared<Node>();
  node->name = name;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  output.set_grad_fn(std::move(node));
  return output;
}

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
  if (root.is_leaf()) {
    accumulate_leaf(root, grad);
    return;
  }

  // Topological order (parents after children in `order` reversed) without recursion.
  // Nodes are held by shared_ptr here: freeing a node's inputs may drop the last other owner.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root.grad_fn(), 0}};
  visited.insert(root.grad_fn().get());
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

  std::unordered_map<Node*, Tensor> grads;
  grads[root.grad_fn().get()] = grad;
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
      if (in.grad_fn()) {
        accumulate_into(grads[in.grad_fn().get()], gi);
      } else {
        accumulate_leaf(in, gi);
      }
    }
    if (!retain_graph) {  // free what backward no longer needs, as soon as it is used
      node->backward = nullptr;
      node->inputs.clear();
    }
  }
}

}  // namespace mixlab
