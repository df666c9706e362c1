// The gradient-routing optimisations (gradient_routing.h) and the GradientRouter through which
// the engine (engine.cpp) lets them choose where each gradient is written.
#include "autograd/gradient_routing.h"

#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/settings.h"

namespace mixlab {

namespace {
std::atomic<bool>& plain_setting() {
  static std::atomic<bool> on{setting_is_one(Setting::PlainAutograd)};
  return on;
}

// What the routing needs to know about the backward pass that is running: how many nodes of the
// graph read each adjacent concat's result and each of its leaves (a span of slots is handed out
// only where exactly one gradient can arrive for each), which leaves' slots were handed to a
// rule and have not come back yet, and the engine's table (take_pending_gradient).
struct BackwardPass {
  std::unordered_map<const Node*, int> concat_uses;
  std::unordered_map<const TensorImpl*, int> leaf_uses;
  std::unordered_set<const TensorImpl*> handed;
  GradientTable* grads = nullptr;
};
thread_local BackwardPass* g_pass = nullptr;

// Counts the uses that matter to leaf_gradient_buffer: of every adjacent concat in the graph and
// of its leaves, by every node of the graph (and the root's own gradient: the root is last).
void count_concat_uses(const std::vector<std::shared_ptr<Node>>& order, BackwardPass& pass) {
  for (const auto& node : order) {
    if (!node->joins_adjacent_leaves) continue;
    pass.concat_uses[node.get()] = node == order.back() ? 1 : 0;
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
// (which deliver_to_leaf adds in place), and the slot coming back costs nothing.
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

// sum += incoming where sum is (add()'s float additions, its memory reused). Same shape, dtype,
// device; sum contiguous and held by the caller alone.
void add_in_place(const Tensor& sum, const Tensor& incoming) {
  if (sum.numel() > 0)
    backend_for(sum.device()).binary(BinaryOp::Add, sum.view(), incoming.view(), sum.view());
}

// In-place sums. For an entry of the engine's table that nothing else holds (not a rule's saved
// tensor, not another input's gradient, not a view of either), the incoming gradient is added
// where the entry is, with add()'s float additions. Saves: a new buffer written for a residual
// stream's gradient, once a block.
bool deliver_to_table(Tensor& sum, const Tensor& incoming) {
  if (!sum.defined() || !sum.writable_in_place() || sum.shape() != incoming.shape() ||
      sum.dtype() != incoming.dtype() || sum.device() != incoming.device())
    return false;
  add_in_place(sum, incoming);
  return true;
}

// A leaf's gradient in its grad slot (a view into an optimizer's flat gradient buffer): the first
// gradient is copied into the slot (unless its rule wrote it there: leaf_gradient_buffer) and
// later ones are added there in place, so every gradient stays in the one buffer the optimizer,
// clipping and zeroing sweep in single passes. The slot is the optimizer's own memory, so no
// other holder sees it change except through .grad. False without a usable slot.
bool deliver_to_leaf(const Tensor& leaf, const Tensor& incoming) {
  TensorImpl& impl = leaf.impl();
  if (g_pass) {  // a rule wrote this gradient straight into the slot: it is in place
    auto it = g_pass->handed.find(&impl);
    if (it != g_pass->handed.end() && same_memory(incoming, Tensor(impl.grad_slot))) {
      g_pass->handed.erase(it);
      return true;
    }
  }
  Tensor slot = usable_slot(impl, incoming.shape(), incoming.dtype(), incoming.device());
  if (!slot.defined()) return false;
  if (!impl.grad) {
    slot.copy_(incoming);
    impl.grad = impl.grad_slot;
  } else {
    add_in_place(slot, incoming);
  }
  return true;
}

class Router final : public GradientRouter {
 public:
  void begin_pass(const std::vector<std::shared_ptr<Node>>& order, GradientTable& grads) override {
    passes_.push_back(std::make_unique<BackwardPass>());
    g_pass = passes_.back().get();
    g_pass->grads = &grads;
    count_concat_uses(order, *g_pass);
  }
  void end_pass() override {
    passes_.pop_back();  // a backward inside a rule ran a pass of its own
    g_pass = passes_.empty() ? nullptr : passes_.back().get();
  }
  bool deliver(const Tensor& input, const Tensor& g, GradientTable& grads) override {
    if (!input.grad_fn()) return deliver_to_leaf(input, g);
    auto it = grads.find(input.grad_fn().get());
    return it != grads.end() && deliver_to_table(it->second, g);
  }

 private:
  std::vector<std::unique_ptr<BackwardPass>> passes_;
};
}  // namespace

bool plain_autograd() { return plain_setting().load(std::memory_order_relaxed); }
void set_plain_autograd(bool on) { plain_setting().store(on); }

GradientRouter* gradient_router() {
  thread_local Router router;
  return plain_autograd() ? nullptr : &router;
}

Tensor leaf_gradient_buffer(const Tensor& input, const Shape& shape, DType dtype, Device device) {
  if (g_pass && input.defined() && input.requires_grad() && input.shape() == shape) {
    if (!input.grad_fn()) {
      Tensor slot = free_slot(input, dtype, device);
      if (slot.defined()) {
        hand_out(input);
        return slot;
      }
    } else if (input.grad_fn()->joins_adjacent_leaves) {
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

}  // namespace mixlab
