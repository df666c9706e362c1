#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"

namespace mixlab {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          std::vector<Tensor> inputs, double eps, double atol, double rtol) {
  for (const Tensor& t : inputs)
    check(t.dtype() == DType::F64 && t.device().is_cpu(),
          "gradcheck: inputs must be float64 CPU tensors");
  // Work on private contiguous copies so perturbations cannot leak into callers' tensors.
  for (Tensor& t : inputs) {
    bool rg = t.requires_grad();
    NoGradGuard no_grad;
    t = clone(t).detach();
    if (rg) t.set_requires_grad(true);
  }
  Tensor probe = fn(inputs);
  Generator gen(1234);
  Tensor weights = Tensor::uniform(probe.shape(), -1.0, 1.0, gen, DType::F64);
  auto scalar = [&](const std::vector<Tensor>& in) {
    NoGradGuard no_grad;
    return sum(mul(fn(in), weights)).item();
  };
  Tensor loss = sum(mul(probe, weights));
  loss.backward();

  GradcheckResult result;
  double worst_excess = -1;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& t = inputs[k];
    if (!t.requires_grad()) continue;
    std::vector<double> analytic = t.grad().defined() ? t.grad().to_double_vector()
                                                      : std::vector<double>(t.numel(), 0.0);
    double* data = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      double saved = data[i];
      data[i] = saved + eps;
      double plus = scalar(inputs);
      data[i] = saved - eps;
      double minus = scalar(inputs);
      data[i] = saved;
      double numeric = (plus - minus) / (2 * eps);
      double err = std::abs(numeric - analytic[i]);
      double allowed = atol + rtol * std::abs(numeric);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (err - allowed > worst_excess) {
        worst_excess = err - allowed;
        std::ostringstream s;
        s << "input " << k << " " << shape_str(t.shape()) << " element " << i << ": analytic "
          << analytic[i] << " numeric " << numeric << " error " << err;
        result.worst = s.str();
      }
      if (err > allowed) result.ok = false;
    }
  }
  return result;
}

}  // namespace mixlab
