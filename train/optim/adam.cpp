// Adam (L2 decay through the gradient) and AdamW (decoupled decay): torch.optim.Adam/AdamW's
// rules with bias correction, one Backend::adam_update_flat call per run of the flat buffer
// (normally the whole model), or Backend::adam_update per parameter on the per-tensor path.
#include "train/optim/optimizer.h"

#include <cmath>

namespace mixlab {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam(std::move(groups), options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled)
    : Optimizer(std::move(groups), options.lr, options.flat_buffer),
      options_(options),
      decoupled_(decoupled) {
  check(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
        type_name(), ": betas must lie in [0, 1), got (", options.beta1, ", ", options.beta2, ")");
  check(options.eps >= 0, type_name(), ": eps must be >= 0, got ", options.eps);
}

std::vector<std::string> Adam::slot_names() const { return {"exp_avg", "exp_avg_sq"}; }

Json Adam::hyper_json() const {
  Json out = Json::object();
  out.set("beta1", options_.beta1);
  out.set("beta2", options_.beta2);
  out.set("eps", options_.eps);
  return out;
}

AdamArgs Adam::args_for(int64_t step, double weight_decay, double lr) const {
  AdamArgs args{};
  args.lr = lr;
  args.beta1 = options_.beta1;
  args.beta2 = options_.beta2;
  args.eps = options_.eps;
  args.weight_decay = weight_decay;
  args.decoupled = decoupled_;
  // Per-parameter step, so a parameter that missed steps is still corrected for its own count.
  args.bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step));
  args.bias_correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step));
  return args;
}

void Adam::update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& slots, int64_t step,
                  const ParamGroup& group, double lr) {
  backend_for(param.device())
      .adam_update(param.view(), grad.view(), slots[0].view(), slots[1].view(),
                   args_for(step, group.weight_decay, lr));
}

void Adam::update_flat(const Tensor& params, const Tensor& grads, const std::vector<Tensor>& slots,
                       int64_t decayed, int64_t step, double weight_decay, double lr) {
  backend_for(params.device())
      .adam_update_flat(params.view(), grads.view(), slots[0].view(), slots[1].view(), decayed,
                        args_for(step, weight_decay, lr));
}

}  // namespace mixlab
