// Optimizers over parameter groups: SGD (momentum, dampening, Nesterov), Adam and AdamW.
//
// Each update is ONE backend kernel call per parameter tensor (Backend::sgd_update /
// Backend::adam_update) on the parameter's own device: no autograd graph, no temporaries, no
// host round trip. The rules are PyTorch's (torch.optim.SGD / Adam / AdamW, default flags):
//
//   SGD    d = g + wd·p;  b = d on a parameter's first step, else μ·b + (1-τ)·d;
//          d = d + μ·b (Nesterov) or b;  p -= lr·d
//   Adam   g += wd·p (L2 through the gradient)              m = β1·m + (1-β1)·g
//   AdamW  p -= lr·wd·p (decoupled, before the moments)     v = β2·v + (1-β2)·g²
//          p -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps)
//
// where t is the parameter's own step count (a parameter skipped because it had no gradient does
// not advance, as in PyTorch) and lr = the optimizer's lr × the group's lr_scale.
//
// State for checkpoints: every parameter has a stable name, its dotted module path when the
// groups come from named_parameters() (param_groups(), named_group()), else "<group>.<index>".
// state_tensors() lists "<name>.<slot>" (slots: exp_avg, exp_avg_sq / momentum_buffer) for the
// parameters that have state; state_json() holds the rest (type, lr, per-parameter steps).
// load_state() validates everything before changing anything.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "io/json.h"

namespace mixlab {

class Module;

struct ParamGroup {
  ParamGroup() = default;
  // Brace-initialisable like the plain aggregate ({params, decay}) without missing-field noise.
  ParamGroup(std::vector<Tensor> params, double weight_decay = 0.0, double lr_scale = 1.0,
             std::vector<std::string> names = {})
      : params(std::move(params)),
        weight_decay(weight_decay),
        lr_scale(lr_scale),
        names(std::move(names)) {}

  std::vector<Tensor> params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;
  // Names parallel to params (checkpoint keys); empty means "<group index>.<param index>".
  std::vector<std::string> names;
};

// One group holding every tensor of `named` (e.g. module.named_parameters()), names kept.
ParamGroup named_group(const std::vector<std::pair<std::string, Tensor>>& named,
                       double weight_decay = 0.0);

// The usual two groups of a model: [0] = tensors of 2+ dimensions (Linear / attention / mixing
// matrices, embedding tables, patch projections) with `weight_decay`; [1] = 1-D and 0-D tensors
// (biases, LayerNorm gains and biases, Affine α/β, LayerScale γ) with no decay. Decaying those
// only pulls gains towards 0 and biases towards the origin, which regularises nothing useful
// (BERT, GPT-2, timm and nanoGPT all exclude them); embeddings, which are 2-D, are decayed, as in
// nanoGPT and timm. An empty group is still returned, so group indices are fixed.
std::vector<ParamGroup> param_groups(const Module& module, double weight_decay);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "SGD", "Adam" or "AdamW": recorded in checkpoints and checked on load.
  virtual std::string type_name() const = 0;

  // One update of every parameter that has a gradient; the others are left untouched and keep
  // their state. Gradients must match their parameter's shape, dtype and device.
  void step();
  // Drops every gradient (PyTorch's set_to_none=True).
  void zero_grad();

  void set_lr(double lr);
  double lr() const { return lr_; }
  // step() calls so far (scalar state; per-parameter counts live in the state).
  int64_t steps_taken() const { return steps_taken_; }

  const std::vector<ParamGroup>& groups() const { return groups_; }
  // Every parameter's name, group by group.
  std::vector<std::string> param_names() const;

  // ---- checkpoint state ----
  // "<param name>.<slot>" -> the live state tensor (on the parameter's device), for parameters
  // that have been stepped at least once, in group order.
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  // {"type": ..., "lr": ..., "steps_taken": ..., "hyper": {...}, "param_steps": {name: t}}.
  Json state_json() const;
  // Restores what state_tensors()/state_json() produced (tensors on any device: copied to each
  // parameter's device). Throws Error, leaving the optimizer unchanged, on a different optimizer
  // type, an unknown or missing parameter name, a missing or unexpected state tensor, or a
  // shape / dtype mismatch (naming the tensor and both shapes). Hyper-parameters are not
  // restored: they come from the constructor, so a resumed run may change them on purpose.
  void load_state(const Json& state, const std::map<std::string, Tensor>& tensors);

 protected:
  Optimizer(std::vector<ParamGroup> groups, double lr);

  // The state tensors a parameter gets on its first step, in order (zeros, like the param).
  virtual std::vector<std::string> slot_names() const = 0;
  // Hyper-parameters written into state_json() for the record.
  virtual Json hyper_json() const = 0;
  // The one kernel call. `step` is the parameter's step count including this one (1 = first).
  virtual void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& slots,
                      int64_t step, const ParamGroup& group, double lr) = 0;

 private:
  struct ParamState {
    int64_t step = 0;
    std::vector<Tensor> slots;  // empty until the first step
  };
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // parallel to groups_[g].params
  double lr_;
  int64_t steps_taken_ = 0;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0 (PyTorch's rule)
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, SgdOptions options);
  std::string type_name() const override { return "SGD"; }
  const SgdOptions& options() const { return options_; }

 protected:
  std::vector<std::string> slot_names() const override;
  Json hyper_json() const override;
  void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& slots, int64_t step,
              const ParamGroup& group, double lr) override;

 private:
  SgdOptions options_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Adam with L2 regularisation through the gradient (torch.optim.Adam's weight_decay).
class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions options);
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);
  std::vector<std::string> slot_names() const override;
  Json hyper_json() const override;
  void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& slots, int64_t step,
              const ParamGroup& group, double lr) override;

 private:
  AdamOptions options_;
  bool decoupled_;
};

// Adam with decoupled weight decay (Loshchilov & Hutter; torch.optim.AdamW).
class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamOptions options)
      : Adam(std::move(groups), options, true) {}
};

}  // namespace mixlab
