// The backward engine: an iterative topological sort of the recorded graph, then one walk in
// reverse order that calls each node's rule and sums the gradients flowing into each tensor.
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace mixlab {

namespace {
thread_local bool g_grad_enabled = true;

// What leaf_gradient_buffer needs to know about the backward pass that is running: how many
// nodes of the graph read each adjacent concat's result and each of its leaves (a span of slots
// is handed out only where exactly one gradient can arrive for each), and which leaves' slots
// were handed to a rule and have not come back yet.
struct BackwardPass {
  std::unordered_map<const Node*, int> concat_uses;
  std::unordered_map<const TensorImpl*, int> leaf_uses;
  std::unordered_set<const TensorImpl*> handed;
  std::unordered_map<Node*, Tensor>* grads = nullptr;  // the pass's table (take_pending_gradient)
};
thread_local BackwardPass* g_pass = nullptr;

struct PassScope {
  explicit PassScope(BackwardPass* pass) : previous(g_pass) { g_pass = pass; }
  ~PassScope() { g_pass = previous; }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;
  BackwardPass* previous;
};

bool is_adjacent_concat(const Node& node) { return std::strcmp(node.name, kAdjacentConcat) == 0; }

// Counts the uses that matter to leaf_gradient_buffer: of every adjacent concat in the graph and
// of its leaves, by every node of the graph (and the root's own gradient).
void count_concat_uses(const std::vector<std::shared_ptr<Node>>& order, const Node* root,
                       BackwardPass& pass) {
  for (const auto& node : order) {
    if (!is_adjacent_concat(*node)) continue;
    pass.concat_uses[node.get()] = node.get() == root ? 1 : 0;
    for (const Tensor& in : node->inputs)
      if (in.defined() && !in.grad_fn()) pass.leaf_uses[&in.impl()] = 0;
  }
  if (pass.concat_uses.empty()) return;
  for (const auto& node : order)
    for (const Tensor& in : node->inputs) {
      if (!in.defined()) continue;
      if (in.grad_fn()) {
        auto it = pass.concat_uses.find(in.grad_fn().get());
        if (it != pass.concat_uses.end()) ++it->second;
      } else {
        auto it = pass.leaf_uses.find(&in.impl());
        if (it != pass.leaf_uses.end()) ++it->second;
      }
    }
}

// Whether `t` is exactly the memory of `slot`.
bool same_memory(const Tensor& t, const Tensor& slot) {
  return t.impl().storage == slot.impl().storage && t.offset() == slot.offset() &&
         t.shape() == slot.shape() && t.is_contiguous();
}

// A leaf's slot where its gradient lives there (none yet, or the slot itself: not one replaced
// by hand) and a gradient of `shape`, `dtype` and `device` fits it; else undefined.
Tensor usable_slot(const TensorImpl& impl, const Shape& shape, DType dtype, Device device) {
  if (!impl.grad_slot || (impl.grad && impl.grad != impl.grad_slot)) return Tensor();
  Tensor slot(impl.grad_slot);
  if (slot.shape() != shape || slot.dtype() != dtype || slot.device() != device ||
      !slot.is_contiguous())
    return Tensor();
  return slot;
}

// A leaf's slot, if it can take this pass's first gradient as `dtype` on `device`.
Tensor free_slot(const Tensor& leaf, DType dtype, Device device) {
  if (!leaf.requires_grad() || leaf.impl().grad) return Tensor();
  return usable_slot(leaf.impl(), leaf.shape(), dtype, device);
}

// Marks a leaf's slot as handed to a rule: a second request in this pass gets a fresh tensor
// (which accumulate_leaf adds in place), and the slot coming back costs nothing.
void hand_out(const Tensor& leaf) {
  TensorImpl& impl = leaf.impl();
  impl.grad = impl.grad_slot;
  g_pass->handed.insert(&impl);
}

// The span of the slots of an adjacent concat's pieces, as `shape`, where it may be handed out.
Tensor concat_slots(const Node& node, const Shape& shape, DType dtype, Device device) {
  auto uses = g_pass->concat_uses.find(&node);
  if (uses == g_pass->concat_uses.end() || uses->second != 1) return Tensor();
  Tensor first;
  int64_t next = 0;
  for (const Tensor& in : node.inputs) {
    if (!in.defined() || in.grad_fn()) return Tensor();
    auto it = g_pass->leaf_uses.find(&in.impl());
    if (it == g_pass->leaf_uses.end() || it->second != 1) return Tensor();
    Tensor slot = free_slot(in, dtype, device);
    if (!slot.defined()) return Tensor();
    if (first.defined() && (slot.impl().storage != first.impl().storage || slot.offset() != next))
      return Tensor();
    if (!first.defined()) first = slot;
    next = slot.offset() + slot.numel();
  }
  if (!first.defined() || numel_of(shape) != next - first.offset()) return Tensor();
  for (const Tensor& in : node.inputs) hand_out(in);
  return make_view(first, shape, contiguous_strides(shape), first.offset());
}

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
  if (slot.writable_in_place() && slot.shape() == incoming.shape() &&
      slot.dtype() == incoming.dtype() && slot.device() == incoming.device()) {
    add_in_place(slot, incoming);
    return;
  }
  slot = accumulate(slot, incoming);
}

// A leaf's gradient. With a grad slot (a view into an optimizer's flat gradient buffer) the first
// gradient is copied into the slot (unless its rule wrote it there: leaf_gradient_buffer) and
// later ones are added there in place, so every gradient
// stays in the one buffer the optimizer, clipping and zeroing sweep in single passes; the sums
// are the same float additions as add()'s. The slot is the optimizer's own memory, so no other
// holder sees it change except through .grad. Without a slot (or when the gradient was replaced
// by hand, or the parameter moved) a fresh tensor holds the sum, as always.
void accumulate_leaf(const Tensor& leaf, const Tensor& incoming) {
  TensorImpl& impl = leaf.impl();
  // A rule wrote this gradient straight into the slot (leaf_gradient_buffer): it is in place.
  if (g_pass) {
    auto it = g_pass->handed.find(&impl);
    if (it != g_pass->handed.end() && same_memory(incoming, Tensor(impl.grad_slot))) {
      g_pass->handed.erase(it);
      return;
    }
  }
  if (Tensor slot = usable_slot(impl, incoming.shape(), incoming.dtype(), incoming.device());
      slot.defined()) {
    if (!impl.grad) {
      slot.copy_(incoming);
      impl.grad = impl.grad_slot;
    } else {
      add_in_place(slot, incoming);
    }
    return;
  }
  leaf.set_grad(contiguous(accumulate(leaf.grad(), incoming)));
}
}  // namespace

Tensor leaf_gradient_buffer(const Tensor& input, const Shape& shape, DType dtype, Device device) {
  if (g_pass && input.defined() && input.requires_grad() && input.shape() == shape) {
    if (!input.grad_fn()) {
      Tensor slot = free_slot(input, dtype, device);
      if (slot.defined()) {
        hand_out(input);
        return slot;
      }
    } else if (is_adjacent_concat(*input.grad_fn())) {
      Tensor span = concat_slots(*input.grad_fn(), shape, dtype, device);
      if (span.defined()) return span;
    }
  }
  return Tensor::empty(shape, dtype, device);
}

Tensor take_pending_gradient(const Tensor& input, const Shape& shape, DType dtype, Device device) {
  if (!g_pass || !g_pass->grads || !input.defined() || !input.grad_fn()) return Tensor();
  auto it = g_pass->grads->find(input.grad_fn().get());
  if (it == g_pass->grads->end()) return Tensor();
  const Tensor& pending = it->second;
  if (!pending.defined() || !pending.writable_in_place() || pending.shape() != shape ||
      pending.dtype() != dtype || pending.device() != device)
    return Tensor();
  Tensor taken = std::move(it->second);
  g_pass->grads->erase(it);
  return taken;
}

bool add_to_leaf_window(const Tensor& leaf, int axis, int64_t start, int64_t length,
                        const Tensor& g) {
  if (!g_pass || !leaf.defined() || leaf.grad_fn() || !leaf.requires_grad()) return false;
  TensorImpl& impl = leaf.impl();
  Tensor slot = usable_slot(impl, leaf.shape(), g.dtype(), g.device());
  if (!slot.defined()) return false;
  const int64_t full = slot.shape()[axis];
  auto part = [&slot, axis](int64_t begin, int64_t size) {
    Shape shape = slot.shape();
    shape[axis] = size;
    return make_view(slot, shape, slot.strides(), slot.offset() + begin * slot.strides()[axis]);
  };
  Tensor window = part(start, length);
  if (impl.grad) {  // a gradient (or a slot handed to a rule, still to come back) is there
    add_in_place(window, g);
    return true;
  }
  window.copy_(g);
  if (start > 0) part(0, start).fill_(0.0);
  if (start + length < full) part(start + length, full - start - length).fill_(0.0);
  impl.grad = impl.grad_slot;
  return true;
}

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

// A parent that an op made (not a leaf) as its place in the graph alone: shape, strides, dtype and
// grad_fn, without its memory. The engine reads no parent's values (a rule captures what its
// gradient needs), so a parent that no rule captured is freed as soon as the forward pass lets go
// of it, as PyTorch's graph edges free it; held by the node, every intermediate lived until the
// backward pass (External attention's memory logits: 25 MB a block in the classifier, read by no
// rule). Leaves stay whole: the engine knows them by their TensorImpl and writes their gradients.
namespace {
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

  BackwardPass pass;
  count_concat_uses(order, root.grad_fn().get(), pass);
  PassScope in_pass(&pass);
  std::unordered_map<Node*, Tensor> grads;
  pass.grads = &grads;
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
