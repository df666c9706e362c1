// The optimizer base: groups, names, the step loop and checkpoint state. The update rules live in
// train/optim/sgd.cpp and train/optim/adam.cpp.
#include "train/optim/optimizer.h"

#include <set>
#include <unordered_map>

#include "autograd/grad_mode.h"
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

namespace {
std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}
}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr)
    : groups_(std::move(groups)), lr_(lr) {
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
}

void Optimizer::set_lr(double lr) {
  check(lr >= 0, "optimizer: learning rate must be >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::step() {
  NoGradGuard no_grad;  // nothing here is differentiable; a contiguous() copy must not record
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
  for (Work& w : work) {
    const ParamGroup& group = groups_[w.g];
    const Tensor& p = group.params[w.i];
    if (!w.grad.is_contiguous()) w.grad = w.grad.contiguous();
    ParamState& st = state_[w.g][w.i];
    if (st.step == 0) {
      st.slots.clear();
      for (size_t s = 0; s < num_slots; ++s)
        st.slots.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
    }
    ++st.step;
    update(p, w.grad, st.slots, st.step, group, lr_ * group.lr_scale);
  }
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
  lr_ = lr;
  steps_taken_ = steps_taken;
}

}  // namespace mixlab
