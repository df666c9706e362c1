#include "train/optim/grad_utils.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace mixlab {

double grad_norm(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  Tensor total;  // a 0-d tensor on the gradients' device
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor partial = sum(mul(g, g));
    // Across tensors in float64 where the device has it: a large model has many partial sums.
    if (partial.dtype() != DType::F64 && backend_for(partial.device()).supports(DType::F64))
      partial = cast(partial, DType::F64);
    if (!total.defined()) {
      total = partial;
    } else {
      check(partial.device() == total.device(), "grad_norm: gradients on ", total.device().str(),
            " and ", partial.device().str());
      total = add(total, cast(partial, total.dtype()));
    }
  }
  return total.defined() ? std::sqrt(total.item()) : 0.0;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  check(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  const double total = grad_norm(params);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) scale_grads(params, coef);
  return total;
}

void scale_grads(const std::vector<Tensor>& params, double factor) {
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) p.set_grad(mul(g, factor));
  }
}

}  // namespace mixlab
