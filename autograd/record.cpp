// Recording the graph: grad mode, record(), which hangs a Node on an op's output, and the
// Node's release (autograd/node.h). The backward walk over what is recorded here is engine.cpp.
#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace mixlab {

namespace {
thread_local bool g_grad_enabled = true;

// A parent that an op made (not a leaf) as its place in the graph alone: shape, strides, dtype and
// grad_fn, without its memory. The engine reads no parent's values (a rule captures what its
// gradient needs), so a parent that no rule captured is freed as soon as the forward pass lets go
// of it, as PyTorch's graph edges free it. Leaves stay whole: their gradients are written there.
Tensor graph_place(const Tensor& made) {
  auto place = std::make_shared<TensorImpl>();
  const TensorImpl& impl = made.impl();
  place->shape = impl.shape;
  place->strides = impl.strides;
  place->offset = impl.offset;
  place->dtype = impl.dtype;
  place->grad_fn = impl.grad_fn;
  return Tensor(std::move(place));
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
  for (Tensor& in : inputs)
    if (in.defined() && in.grad_fn()) in = graph_place(in);
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  output.set_grad_fn(std::move(node));
  return output;
}

}  // namespace mixlab
