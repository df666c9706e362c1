// SGD with momentum, dampening, Nesterov and L2 weight decay: torch.optim.SGD's rule, one
// Backend::sgd_update_flat call per run of the flat buffer (normally the whole model), or
// Backend::sgd_update per parameter on the per-tensor path.
#include "train/optim/optimizer.h"

namespace mixlab {

Sgd::Sgd(std::vector<ParamGroup> groups, SgdOptions options)
    : Optimizer(std::move(groups), options.lr, options.flat_buffer), options_(options) {
  check(options.momentum >= 0, "SGD: momentum must be >= 0, got ", options.momentum);
  check(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
        "SGD: Nesterov momentum needs momentum > 0 and dampening == 0");
}

// Without momentum there is no buffer: the state is just the step count.
std::vector<std::string> Sgd::slot_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

Json Sgd::hyper_json() const {
  Json out = Json::object();
  out.set("momentum", options_.momentum);
  out.set("dampening", options_.dampening);
  out.set("nesterov", options_.nesterov);
  return out;
}

SgdArgs Sgd::args_for(int64_t step, double weight_decay, double lr) const {
  SgdArgs args{};
  args.lr = lr;
  args.momentum = options_.momentum;
  args.dampening = options_.dampening;
  args.weight_decay = weight_decay;
  args.nesterov = options_.nesterov;
  args.first_step = step == 1;  // the buffer starts as the gradient itself, undamped
  return args;
}

namespace {
// Null without momentum: the kernel does not touch it then.
View buffer_of(const std::vector<Tensor>& slots) {
  return slots.empty() ? View{} : slots[0].view();
}
}  // namespace

void Sgd::update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& slots, int64_t step,
                 const ParamGroup& group, double lr) {
  backend_for(param.device())
      .sgd_update(param.view(), grad.view(), buffer_of(slots),
                  args_for(step, group.weight_decay, lr));
}

void Sgd::update_flat(const Tensor& params, const Tensor& grads, const std::vector<Tensor>& slots,
                      int64_t decayed, int64_t step, double weight_decay, double lr) {
  backend_for(params.device())
      .sgd_update_flat(params.view(), grads.view(), buffer_of(slots), decayed,
                       args_for(step, weight_decay, lr));
}

}  // namespace mixlab
