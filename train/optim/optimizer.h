// Optimizers over parameter groups: SGD (momentum, dampening, Nesterov), Adam and AdamW.
//
// The flat buffer (llm.c's params_memory / grads_memory / m_memory / v_memory): when the
// parameters share one device and dtype, the optimizer lays them out back to back in ONE buffer,
// group by group (param_groups() puts the decayed tensors first), copies their values there and
// makes each parameter tensor a view into it (the same TensorImpl, so modules and every other
// handle see it; forward and backward code is unchanged). Each parameter also gets a slot in a
// flat gradient buffer (TensorImpl::grad_slot): backward() puts a leaf's first gradient in its
// slot (the linear, layer-norm, scale-shift and embedding rules write it there directly,
// leaf_gradient_buffer in autograd/node.h; others' are copied) and adds later ones there in
// place. Laid out back to back, attention's W_Q, W_K, W_V (and their biases) concatenate into
// the packed projection as a view, and its gradient lands in their three slots. The moments
// (exp_avg, exp_avg_sq / momentum_buffer) get one flat buffer each at the first step. A step is
// then ONE backend call (Backend::adam_update_flat / sgd_update_flat) over the whole range, with
// one boundary index: elements before it get the group's weight decay, elements after it none.
// clip_grad_norm and scale_grads (train/grad_utils.h) see the same range and make one reduction and
// one in-place scale over it. zero_grad() stays set-to-none: the next first gradient overwrites its
// slot, so no pass over memory is needed at all.
//
// A step splits into more calls only where the per-tensor rule demands it: a parameter without a
// gradient (skipped, as in PyTorch), parameters at different step counts (different bias
// corrections), groups with different lr_scale or a decayed group after an undecayed one; a
// gradient set by hand (not in its slot) is updated with the per-tensor kernel
// (Backend::adam_update / sgd_update). When the parameters were moved or replaced after the
// optimizer was built (Module::to(), assign_in_place) the next step lays them out again; mixed
// devices or dtypes, or parameters that share memory, keep the per-tensor path. The options'
// `flat_buffer = false` keeps the per-tensor path throughout (tests compare the two).
//
// The rules are PyTorch's (torch.optim.SGD / Adam / AdamW, default flags), element by element
// the same on both paths (backends/optim_updates.h):
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
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "SGD", "Adam" or "AdamW": recorded in checkpoints and checked on load.
  virtual std::string type_name() const = 0;

  // One update of every parameter that has a gradient; the others are left untouched and keep
  // their state. Gradients must match their parameter's shape, dtype and device.
  void step();
  // Drops every gradient (PyTorch's set_to_none=True).
  void zero_grad();

  // ---- the flat buffer (see the top of this file) ----
  // True while every parameter is a view into one flat buffer of this optimizer.
  bool is_flat() const;
  // The flat parameter and gradient buffers (1-D, every parameter in group order); undefined
  // without the flat layout.
  const Tensor& flat_params() const { return flat_.params; }
  const Tensor& flat_grads() const { return flat_.grads; }

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
  Optimizer(std::vector<ParamGroup> groups, double lr, bool flat_buffer);

  // The state tensors a parameter gets on its first step, in order (zeros, like the param).
  virtual std::vector<std::string> slot_names() const = 0;
  // Hyper-parameters written into state_json() for the record.
  virtual Json hyper_json() const = 0;
  // The one kernel call. `step` is the parameter's step count including this one (1 = first).
  virtual void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& slots,
                      int64_t step, const ParamGroup& group, double lr) = 0;
  // The one kernel call over a range of the flat buffers (all 1-D, the same length): elements
  // [0, decayed) get `weight_decay`, the rest none; every parameter in the range is at `step`.
  virtual void update_flat(const Tensor& params, const Tensor& grads,
                           const std::vector<Tensor>& slots, int64_t decayed, int64_t step,
                           double weight_decay, double lr) = 0;

 private:
  struct ParamState {
    int64_t step = 0;
    // Empty until the first step; with the flat layout, views into flat_.slots (zero while
    // step == 0).
    std::vector<Tensor> slots;
  };
  // The flat layout; params undefined when the parameters are not laid out flat.
  struct FlatBuffers {
    Tensor params, grads;          // 1-D, every parameter's elements back to back in group order
    std::vector<Tensor> slots;     // 1-D, one per slot name; empty until the first step
    std::vector<int64_t> offsets;  // each parameter's start in group order, then the total
  };
  // (Re)builds the flat layout from the parameters as they are now (values, gradients), or
  // leaves it empty when they cannot share one buffer.
  void build_flat();
  // Whether every parameter (and its gradient slot) still lives where build_flat() put it.
  bool flat_intact() const;
  // Allocates the flat state buffers and makes every parameter's state tensors views into them
  // (copying the state of parameters that have some; the rest stay zero).
  void bind_flat_slots(size_t num_slots);
  // Clears the gradient slots that point into this optimizer's flat gradient buffer.
  void release_grad_slots();
  // One flat update per run of consecutive parameters (see the top of this file); each item is
  // a parameter whose gradient is in its slot: group g, index i, position k in the layout.
  struct FlatItem {
    size_t g, i, k;
  };
  void step_flat_runs(const std::vector<FlatItem>& items);

  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // parallel to groups_[g].params
  double lr_;
  int64_t steps_taken_ = 0;
  bool want_flat_;
  FlatBuffers flat_;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;    // needs momentum > 0 and dampening == 0 (PyTorch's rule)
  bool flat_buffer = true;  // false: the per-tensor path (one kernel call per parameter)
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
  void update_flat(const Tensor& params, const Tensor& grads, const std::vector<Tensor>& slots,
                   int64_t decayed, int64_t step, double weight_decay, double lr) override;

 private:
  SgdArgs args_for(int64_t step, double weight_decay, double lr) const;
  SgdOptions options_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool flat_buffer = true;  // false: the per-tensor path (one kernel call per parameter)
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
  void update_flat(const Tensor& params, const Tensor& grads, const std::vector<Tensor>& slots,
                   int64_t decayed, int64_t step, double weight_decay, double lr) override;

 private:
  AdamArgs args_for(int64_t step, double weight_decay, double lr) const;
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
