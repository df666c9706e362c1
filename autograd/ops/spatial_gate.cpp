// gMLP's and aMLP's spatial gate (mixers.md §9) as one kernel each way:
//
//   forward:   y = z ⊙ (g + bias[t])                    (g, z [..., N, C], bias [N])
//   backward:  dg = dy ⊙ z,  dz = dy ⊙ (g + bias[t]),  dbias[t] = Σ_(rows of token t) Σ_c dg
//
// where add(g, reshape(bias, {N, 1})) and mul(·, z) took two passes forward, and two multiplies
// and a broadcast sum backward. The kernel gives each row's sum of dg; the sum over the batch of
// those [rows / N, N] sums is the last, small step.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor spatial_gate(const Tensor& g, const Tensor& bias, const Tensor& z) {
  const char* op = "spatial_gate";
  check_same(op, {&g, &bias, &z});
  check(g.dim() >= 2 && g.shape() == z.shape(), op,
        ": g and z must have one shape [..., tokens, channels], got ", shape_str(g.shape()),
        " and ", shape_str(z.shape()));
  const int64_t tokens = g.size(-2), channels = g.size(-1);
  check(bias.dim() == 1 && bias.size(0) == tokens, op, ": bias must be [tokens] = [", tokens,
        "] for g ", shape_str(g.shape()), ", got ", shape_str(bias.shape()));
  const int64_t batch = tokens * channels == 0 ? 0 : g.numel() / (tokens * channels);
  Tensor gd = dense(g), bd = dense(bias), zd = dense(z);
  Tensor y = Tensor::empty(g.shape(), g.dtype(), g.device());
  if (y.numel() > 0)
    backend_of(g).spatial_gate(gd.view(), bd.view(), zd.view(), y.view(), batch, tokens, channels);
  return record(op, y, {g, bias, z}, [gd, bd, zd, batch, tokens, channels](const Tensor& grad) {
    Tensor dy = dense(grad);
    Tensor dg = Tensor::empty(gd.shape(), gd.dtype(), gd.device());
    Tensor dz = Tensor::empty(zd.shape(), zd.dtype(), zd.device());
    // Written whole by the kernel; zeros only when rows have no channels (nothing runs).
    Tensor row_sums = dg.numel() > 0 ? Tensor::empty({batch, tokens}, gd.dtype(), gd.device())
                                     : Tensor::zeros({batch, tokens}, gd.dtype(), gd.device());
    if (dg.numel() > 0)
      backend_of(gd).spatial_gate_backward(dy.view(), gd.view(), bd.view(), zd.view(), dg.view(),
                                           dz.view(), row_sums.view(), batch, tokens, channels);
    return std::vector<Tensor>{dg, sum(row_sums, {0}), dz};
  });
}

}  // namespace mixlab
