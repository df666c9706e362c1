// x * scale + shift along the last axis (ResMLP's affine map Aff(x) = α ⊙ x + β, and LayerScale
// γ ⊙ x without the shift) as one kernel each way, where mul and add took two passes forward
// and four (two products, two column sums) backward.
//
//   forward:   y[r, c]   = x[r, c] s[c] + t[c]
//   backward:  dx[r, c]  = dy[r, c] s[c]
//              ds[c]     = Σ_r dy[r, c] x[r, c]
//              dt[c]     = Σ_r dy[r, c]
#include "autograd/gradient_routing.h"
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor scale_shift(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  std::vector<const Tensor*> all{&x, &scale};
  if (shift.defined()) all.push_back(&shift);
  check_same("scale_shift", all);
  check(x.dim() >= 1, "scale_shift: input must have at least one axis, got ", shape_str(x.shape()));
  int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  for (const Tensor* p : {&scale, &shift})
    if (p->defined() && p->shape() != Shape{cols})
      fail("scale_shift: input ", shape_str(x.shape()), " needs a scale and shift of shape [", cols,
           "], got ", shape_str(p->shape()));
  Tensor in = dense(x), s = dense(scale), t = shift.defined() ? dense(shift) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (rows > 0)
    backend_of(x).scale_shift(in.view(), s.view(), view_or_none(t, x.dtype()), y.view(), rows,
                              cols);
  std::vector<Tensor> inputs{x, scale};
  if (shift.defined()) inputs.push_back(shift);
  bool shifted = shift.defined();
  return record(
      "scale_shift", y, inputs,
      [in = in.detach(), s = s.detach(), scale, shift, shifted, rows, cols](const Tensor& g) {
        Tensor gd = dense(g);
        Tensor dx = Tensor::empty(in.shape(), in.dtype(), in.device());
        // Straight into the parameters' grad slots where they have them.
        Tensor ds = leaf_gradient_buffer(scale, {cols}, in.dtype(), in.device());
        Tensor dt =
            shifted ? leaf_gradient_buffer(shift, {cols}, in.dtype(), in.device()) : Tensor();
        if (rows > 0) {
          backend_of(in).scale_shift_backward(gd.view(), in.view(), s.view(), dx.view(), ds.view(),
                                              view_or_none(dt, in.dtype()), rows, cols);
        } else {
          ds.fill_(0.0);
          if (shifted) dt.fill_(0.0);
        }
        std::vector<Tensor> grads{dx, ds};
        if (shifted) grads.push_back(dt);
        return grads;
      });
}

}  // namespace mixlab
