// The optimizer base: groups, names, the flat buffer, the step loop and checkpoint state. The
// update rules live in train/optim/sgd.cpp and train/optim/adam.cpp.
#include "train/optim/optimizer.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "core/strings.h"
#include "nn/module.h"

namespace mixlab {

ParamGroup named_group(const std::vector<std::pair<std::string, Tensor>>& named,
                       double weight_decay) {
  ParamGroup group;
  group.weight_decay = weight_decay;
  for (const auto& [name, t] : named) {
    group.params.push_back(t);
    group.names.push_back(name);
  }
  return group;
}

std::vector<ParamGroup> param_groups(const Module& module, double weight_decay) {
  std::vector<std::pair<std::string, Tensor>> decay, no_decay;
  for (const auto& [name, t] : module.named_parameters())
    (t.dim() >= 2 ? decay : no_decay).emplace_back(name, t);
  return {named_group(decay, weight_decay), named_group(no_decay, 0.0)};
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, bool flat_buffer)
    : groups_(std::move(groups)), lr_(lr), want_flat_(flat_buffer) {
  check(lr >= 0, "optimizer: learning rate must be >= 0, got ", lr);
  std::set<const TensorImpl*> seen;
  std::set<std::string> names;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    check(group.weight_decay >= 0, "optimizer: group ", g, " has weight_decay ", group.weight_decay,
          " < 0");
    check(group.lr_scale >= 0, "optimizer: group ", g, " has lr_scale ", group.lr_scale, " < 0");
    if (group.names.empty())
      for (size_t i = 0; i < group.params.size(); ++i)
        group.names.push_back(std::to_string(g) + "." + std::to_string(i));
    check(group.names.size() == group.params.size(), "optimizer: group ", g, " has ",
          group.params.size(), " parameters but ", group.names.size(), " names");
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      const std::string& name = group.names[i];
      check(p.defined(), "optimizer: parameter '", name, "' is undefined");
      check(is_floating(p.dtype()), "optimizer: parameter '", name, "' is ", dtype_name(p.dtype()),
            "; only floating tensors can be optimized");
      check(p.is_leaf(), "optimizer: parameter '", name,
            "' is the result of an op, not a leaf; pass the leaf tensor");
      // Stepping one tensor twice per step would be silently wrong (PyTorch refuses it too).
      check(seen.insert(&p.impl()).second, "optimizer: parameter '", name,
            "' appears more than once");
      check(!name.empty() && names.insert(name).second, "optimizer: parameter name '", name,
            "' is empty or repeated");
    }
  }
  state_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) state_[g].resize(groups_[g].params.size());
  if (want_flat_) build_flat();
}

Optimizer::~Optimizer() { release_grad_slots(); }

// ---- the flat buffer ----

void Optimizer::release_grad_slots() {
  if (!flat_.grads.defined()) return;
  for (const auto& group : groups_)
    for (const Tensor& p : group.params) {
      TensorImpl& t = p.impl();
      if (t.grad_slot && t.grad_slot->storage == flat_.grads.impl().storage) t.grad_slot.reset();
    }
}

void Optimizer::build_flat() {
  release_grad_slots();
  flat_ = FlatBuffers{};
  std::vector<Tensor> all;
  for (const auto& group : groups_) all.insert(all.end(), group.params.begin(), group.params.end());
  if (all.empty()) return;
  const Device device = all[0].device();
  const DType dtype = all[0].dtype();
  // Parameters that share memory (one a view of another) would be untied by separate copies.
  std::vector<std::tuple<const Storage*, int64_t, int64_t>> spans;
  for (const Tensor& p : all) {
    if (p.device() != device || p.dtype() != dtype || !p.is_contiguous()) return;
    spans.emplace_back(p.impl().storage.get(), p.offset(), p.offset() + p.numel());
  }
  std::sort(spans.begin(), spans.end());
  for (size_t j = 1; j < spans.size(); ++j)
    if (std::get<0>(spans[j]) == std::get<0>(spans[j - 1]) &&
        std::get<1>(spans[j]) < std::get<2>(spans[j - 1]))
      return;

  std::vector<int64_t> offsets{0};
  for (const Tensor& p : all) offsets.push_back(offsets.back() + p.numel());
  Tensor params = Tensor::empty({offsets.back()}, dtype, device);
  Tensor grads = Tensor::zeros({offsets.back()}, dtype, device);
  for (size_t k = 0; k < all.size(); ++k) {
    const Tensor& p = all[k];
    const Shape strides = contiguous_strides(p.shape());
    Tensor value = make_view(params, p.shape(), strides, offsets[k]);
    value.copy_(p);
    Tensor slot = make_view(grads, p.shape(), strides, offsets[k]);
    Tensor g = p.grad();
    if (g.defined() && g.shape() == p.shape() && g.dtype() == dtype && g.device() == device) {
      slot.copy_(g);
      p.set_grad(slot);
    }
    p.set_grad_slot(slot);
    // The parameter's own TensorImpl becomes the view, so every handle on it follows.
    TensorImpl& t = p.impl();
    t.storage = params.impl().storage;
    t.strides = strides;
    t.offset = offsets[k];
  }
  flat_.params = params;
  flat_.grads = grads;
  flat_.offsets = std::move(offsets);
}

bool Optimizer::flat_intact() const {
  if (!flat_.params.defined()) return false;
  const TensorImpl& base = flat_.params.impl();
  size_t k = 0;
  for (const auto& group : groups_)
    for (const Tensor& p : group.params) {
      const TensorImpl& t = p.impl();
      if (t.storage != base.storage || t.dtype != base.dtype || t.offset != flat_.offsets[k] ||
          p.numel() != flat_.offsets[k + 1] - flat_.offsets[k] || !p.is_contiguous() ||
          !t.grad_slot || t.grad_slot->storage != flat_.grads.impl().storage ||
          t.grad_slot->offset != flat_.offsets[k])
        return false;
      ++k;
    }
  return true;
}

bool Optimizer::is_flat() const { return flat_intact(); }

void Optimizer::bind_flat_slots(size_t num_slots) {
  const Tensor& params = flat_.params;
  flat_.slots.clear();
  for (size_t s = 0; s < num_slots; ++s)
    flat_.slots.push_back(Tensor::zeros(params.shape(), params.dtype(), params.device()));
  size_t k = 0;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i, ++k) {
      const Tensor& p = groups_[g].params[i];
      ParamState& st = state_[g][i];
      std::vector<Tensor> views;
      for (size_t s = 0; s < num_slots; ++s) {
        Tensor view =
            make_view(flat_.slots[s], p.shape(), contiguous_strides(p.shape()), flat_.offsets[k]);
        if (st.step > 0 && s < st.slots.size()) {
          const Tensor& old = st.slots[s];
          view.copy_(old.device() == view.device() ? old : old.to(view.device()));
        }
        views.push_back(view);
      }
      st.slots = std::move(views);
    }
}

void Optimizer::step_flat_runs(const std::vector<FlatItem>& items) {
  struct Run {
    size_t first_k, last_k;
    int64_t decayed_end;  // element index where the undecayed part begins
    int64_t step;
    double weight_decay, lr_scale;
    bool undecayed_part;  // an undecayed parameter joined: no decayed one may follow
  };
  std::optional<Run> run;
  auto range = [](const Tensor& flat, int64_t begin, int64_t end) {
    return make_view(flat, {end - begin}, {1}, flat.offset() + begin);
  };
  auto flush = [&] {
    if (!run) return;
    const int64_t begin = flat_.offsets[run->first_k], end = flat_.offsets[run->last_k + 1];
    std::vector<Tensor> slots;
    for (const Tensor& s : flat_.slots) slots.push_back(range(s, begin, end));
    update_flat(range(flat_.params, begin, end), range(flat_.grads, begin, end), slots,
                run->decayed_end - begin, run->step, run->weight_decay, lr_ * run->lr_scale);
    run.reset();
  };
  for (const FlatItem& item : items) {
    const ParamGroup& group = groups_[item.g];
    ParamState& st = state_[item.g][item.i];
    const int64_t step = st.step + 1;
    const double wd = group.weight_decay;
    const int64_t end = flat_.offsets[item.k + 1];
    bool joins =
        run && item.k == run->last_k + 1 && step == run->step && group.lr_scale == run->lr_scale;
    if (joins) {
      if (!run->undecayed_part && wd == run->weight_decay)
        run->decayed_end = end;
      else if (wd == 0)
        run->undecayed_part = true;
      else
        joins = false;
    }
    if (!joins) {
      flush();
      run = Run{item.k,         item.k, wd == 0 ? flat_.offsets[item.k] : end, step, wd,
                group.lr_scale, wd == 0};
    }
    run->last_k = item.k;
    st.step = step;
  }
  flush();
}

void Optimizer::set_lr(double lr) {
  check(lr >= 0, "optimizer: learning rate must be >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::step() {
  NoGradGuard no_grad;  // nothing here is differentiable; a contiguous() copy must not record
  // Parameters moved or replaced since the layout was made (Module::to(), a load that swapped
  // storage, another optimizer over them): lay them out again (values and gradients copied).
  if (want_flat_ && !flat_intact()) build_flat();
  // Check every parameter first, so that a bad gradient leaves no parameter half-stepped.
  struct Work {
    size_t g, i;
    Tensor grad;
  };
  std::vector<Work> work;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      const std::string& name = group.names[i];
      check(grad.shape() == p.shape(), "optimizer: gradient of '", name, "' is ",
            shape_str(grad.shape()), " but the parameter is ", shape_str(p.shape()));
      check(grad.dtype() == p.dtype(), "optimizer: gradient of '", name, "' is ",
            dtype_name(grad.dtype()), " but the parameter is ", dtype_name(p.dtype()));
      check(grad.device() == p.device(), "optimizer: gradient of '", name, "' is on ",
            grad.device().str(), " but the parameter is on ", p.device().str());
      // The kernels update in place over contiguous memory; parameters always are (Module
      // creates them so), gradients from backward() too, but a user-set one may not be.
      check(p.is_contiguous(), "optimizer: parameter '", name, "' is not contiguous");
      // Module::to() after the optimizer was built moves the parameter but not this state.
      const ParamState& st = state_[g][i];
      if (st.step > 0 && !st.slots.empty()) {
        const Tensor& s0 = st.slots[0];
        check(s0.device() == p.device() && s0.dtype() == p.dtype(), "optimizer: the state of '",
              name, "' is ", dtype_name(s0.dtype()), " on ", s0.device().str(),
              " but the parameter is ", dtype_name(p.dtype()), " on ", p.device().str(),
              "; build the optimizer after moving or converting the model");
      }
      work.push_back({g, i, std::move(grad)});
    }
  }

  const size_t num_slots = slot_names().size();
  const bool flat = flat_.params.defined();
  if (flat && num_slots > 0 && flat_.slots.empty()) bind_flat_slots(num_slots);
  std::vector<size_t> group_start{0};  // layout position of each group's first parameter
  for (const auto& group : groups_) group_start.push_back(group_start.back() + group.params.size());

  std::vector<FlatItem> in_slots;  // gradients in their flat slots: stepped together below
  for (Work& w : work) {
    const ParamGroup& group = groups_[w.g];
    const Tensor& p = group.params[w.i];
    if (flat && w.grad.impl_ptr() == p.impl().grad_slot) {
      in_slots.push_back({w.g, w.i, group_start[w.g] + w.i});
      continue;
    }
    // A gradient set by hand (or no flat layout): the per-tensor kernel.
    if (!w.grad.is_contiguous()) w.grad = w.grad.contiguous();
    ParamState& st = state_[w.g][w.i];
    if (st.slots.size() != num_slots) {  // flat slots are bound (and zero) before the 1st step
      st.slots.clear();
      for (size_t s = 0; s < num_slots; ++s)
        st.slots.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
    }
    ++st.step;
    update(p, w.grad, st.slots, st.step, group, lr_ * group.lr_scale);
  }
  step_flat_runs(in_slots);
  ++steps_taken_;
}

void Optimizer::zero_grad() {
  for (const auto& group : groups_)
    for (const auto& p : group.params) p.zero_grad();
}

std::vector<std::string> Optimizer::param_names() const {
  std::vector<std::string> out;
  for (const auto& group : groups_) out.insert(out.end(), group.names.begin(), group.names.end());
  return out;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  const std::vector<std::string> slots = slot_names();
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const ParamState& st = state_[g][i];
      if (st.step == 0) continue;
      for (size_t s = 0; s < slots.size(); ++s)
        out.emplace_back(groups_[g].names[i] + "." + slots[s], st.slots[s]);
    }
  return out;
}

Json Optimizer::state_json() const {
  Json steps = Json::object();
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i)
      if (state_[g][i].step > 0) steps.set(groups_[g].names[i], state_[g][i].step);
  Json out = Json::object();
  out.set("type", type_name());
  out.set("lr", lr_);
  out.set("steps_taken", steps_taken_);
  out.set("hyper", hyper_json());
  out.set("param_steps", std::move(steps));
  return out;
}

void Optimizer::load_state(const Json& state, const std::map<std::string, Tensor>& tensors) {
  NoGradGuard no_grad;
  const std::string type = state.at("type").as_string();
  check(type == type_name(), "optimizer state: saved by ", type, ", loading into ", type_name());
  const double lr = state.at("lr").as_double();
  const int64_t steps_taken = state.at("steps_taken").as_int64();
  check(lr >= 0 && steps_taken >= 0, "optimizer state: negative lr or steps_taken");

  std::unordered_map<std::string, std::pair<size_t, size_t>> where;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) where[groups_[g].names[i]] = {g, i};

  // Build the complete new state aside; nothing is touched until every check has passed.
  std::vector<std::vector<ParamState>> fresh(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) fresh[g].resize(groups_[g].params.size());
  std::vector<std::string> problems, unknown;
  std::set<std::string> used;
  const std::vector<std::string> slots = slot_names();
  for (const auto& [name, value] : state.at("param_steps").as_object()) {
    auto it = where.find(name);
    if (it == where.end()) {
      unknown.push_back(name);
      continue;
    }
    const auto [g, i] = it->second;
    const Tensor& p = groups_[g].params[i];
    ParamState& st = fresh[g][i];
    st.step = value.as_int64();
    if (st.step < 1) problems.push_back("'" + name + "' has step count " + value.dump());
    for (const std::string& slot : slots) {
      const std::string key = name + "." + slot;
      auto t = tensors.find(key);
      if (t == tensors.end()) {
        problems.push_back("missing state tensor '" + key + "'");
        continue;
      }
      used.insert(key);
      const Tensor& src = t->second;
      if (src.shape() != p.shape() || src.dtype() != p.dtype()) {
        problems.push_back("'" + key + "' is " + shape_str(src.shape()) + " " +
                           dtype_name(src.dtype()) + " but the parameter is " +
                           shape_str(p.shape()) + " " + dtype_name(p.dtype()));
        continue;
      }
      Tensor copy = src.to(p.device());
      if (copy.same_as(src)) copy = src.clone();  // never alias the caller's tensors
      st.slots.push_back(copy);
    }
  }
  if (!unknown.empty())
    problems.push_back("state for parameters this optimizer does not have: " + join(unknown));
  std::vector<std::string> unexpected;
  for (const auto& [key, t] : tensors)
    if (!used.count(key)) unexpected.push_back(key);
  if (!unexpected.empty()) problems.push_back("unexpected state tensors: " + join(unexpected));
  if (!problems.empty()) fail("optimizer state (", type_name(), "): ", join(problems));

  state_ = std::move(fresh);
  flat_.slots.clear();  // the next step binds the flat state buffers again, from these tensors
  lr_ = lr;
  steps_taken_ = steps_taken;
}

}  // namespace mixlab
