// x normalised to sum 1 along one axis, y = x / (eps + Σ_axis x), as one kernel each way
// (External attention's double normalisation over its memory slots), where sum, add and div
// took three passes forward and the division's generic gradient six backward.
//
//   forward:   D = eps + Σ_l x_l,  y_l = x_l / D            (D saved: [outer, inner])
//   backward:  dx_l = (dy_l − Σ_l' dy_l' y_l') / D
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor sum_normalize(const Tensor& x, int64_t axis, double eps) {
  check(x.dim() >= 1, "sum_normalize: input must have at least one axis, got ",
        shape_str(x.shape()));
  const int64_t a = axis < 0 ? axis + x.dim() : axis;
  check(a >= 0 && a < x.dim(), "sum_normalize: axis ", axis, " is out of range for input ",
        shape_str(x.shape()));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < a; ++i) outer *= x.size(i);
  for (int64_t i = a + 1; i < x.dim(); ++i) inner *= x.size(i);
  const int64_t length = x.size(a);
  Tensor in = dense(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor denom = Tensor::empty({outer, inner}, x.dtype(), x.device());
  if (x.numel() > 0)
    backend_of(x).sum_normalize(in.view(), y.view(), denom.view(), outer, length, inner, eps);
  return record("sum_normalize", y, {x},
                [out = y.detach(), denom, outer, length, inner](const Tensor& g) {
                  Tensor gd = dense(g);
                  Tensor dx = Tensor::empty(out.shape(), out.dtype(), out.device());
                  if (out.numel() > 0)
                    backend_of(out).sum_normalize_backward(gd.view(), out.view(), denom.view(),
                                                           dx.view(), outer, length, inner);
                  return std::vector<Tensor>{dx};
                });
}

}  // namespace mixlab
