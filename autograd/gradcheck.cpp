#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"

namespace mixlab {

GradcheckResult gradcheck_leaves(const std::function<Tensor()>& fn,
                                 const std::vector<Tensor>& leaves, double eps, double atol,
                                 double rtol) {
  for (const Tensor& t : leaves)
    check(t.dtype() == DType::F64 && t.device().is_cpu() && t.is_contiguous() && t.is_leaf(),
          "gradcheck: tensors must be float64 contiguous CPU leaves, got ", dtype_name(t.dtype()),
          " ", shape_str(t.shape()));
  for (const Tensor& t : leaves) t.zero_grad();
  Tensor probe = fn();
  Generator gen(1234);
  Tensor weights = Tensor::uniform(probe.shape(), -1.0, 1.0, gen, DType::F64);
  auto scalar = [&] {
    NoGradGuard no_grad;
    return sum(mul(fn(), weights)).item();
  };
  sum(mul(probe, weights)).backward();

  GradcheckResult result;
  double worst_excess = -1;
  for (size_t k = 0; k < leaves.size(); ++k) {
    const Tensor& t = leaves[k];
    if (!t.requires_grad()) continue;
    std::vector<double> analytic =
        t.grad().defined() ? t.grad().to_double_vector() : std::vector<double>(t.numel(), 0.0);
    double* data = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      double saved = data[i];
      data[i] = saved + eps;
      double plus = scalar();
      data[i] = saved - eps;
      double minus = scalar();
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
  for (const Tensor& t : leaves) t.zero_grad();
  return result;
}

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          std::vector<Tensor> inputs, double eps, double atol, double rtol) {
  for (const Tensor& t : inputs)
    check(t.dtype() == DType::F64 && t.device().is_cpu(),
          "gradcheck: inputs must be float64 CPU tensors");
  // Private contiguous copies, so perturbations cannot leak into the caller's tensors.
  for (Tensor& t : inputs) {
    bool rg = t.requires_grad();
    NoGradGuard no_grad;
    t = clone(t).detach();
    if (rg) t.set_requires_grad(true);
  }
  return gradcheck_leaves([&] { return fn(inputs); }, inputs, eps, atol, rtol);
}

}  // namespace mixlab
