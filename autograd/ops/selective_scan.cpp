// The selective scan of mamba (mixers.md §17) as one op: the recurrence over the tokens runs in
// the backend's kernel, the state kept for the current token only; the backward is the reverse
// scan, which recomputes the states (backends/kernels.def, selective_scan). Forward and backward:
//   h_i = exp(Δ_i A) ⊙ h_{i−1} + Δ_i B_i u_i,   y_i = C_i · h_i + D ⊙ u_i          (per channel)
//   dh_i = C_i g_i + exp(Δ_{i+1} A) ⊙ dh_{i+1}, then du, dΔ, dA, dB, dC, dD from dh and the states.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

void check_scan_shapes(const Tensor& u, const Tensor& delta, const Tensor& a, const Tensor& b,
                       const Tensor& c, const Tensor& d) {
  const char* op = "selective_scan";
  check_same(op, {&u, &delta, &a, &b, &c, &d});
  auto shapes = [&] {
    return "u " + shape_str(u.shape()) + ", delta " + shape_str(delta.shape()) + ", A " +
           shape_str(a.shape()) + ", B " + shape_str(b.shape()) + ", C " + shape_str(c.shape()) +
           ", D " + shape_str(d.shape());
  };
  check(u.dim() == 3 && a.dim() == 2, op,
        ": needs u and delta [batch, tokens, channels], A [channels, state], B and C [batch, "
        "tokens, state], D [channels]; got ",
        shapes());
  const int64_t batch = u.size(0), tokens = u.size(1), channels = u.size(2), state = a.size(1);
  check(delta.shape() == u.shape() && a.size(0) == channels &&
            b.shape() == Shape{batch, tokens, state} && c.shape() == b.shape() &&
            d.shape() == Shape{channels},
        op,
        ": needs u and delta [batch, tokens, channels], A [channels, state], B and C [batch, "
        "tokens, state], D [channels]; got ",
        shapes());
}

}  // namespace

Tensor selective_scan(const Tensor& u_in, const Tensor& delta_in, const Tensor& a_in,
                      const Tensor& b_in, const Tensor& c_in, const Tensor& d_in) {
  check_scan_shapes(u_in, delta_in, a_in, b_in, c_in, d_in);
  Tensor u = dense(u_in), delta = dense(delta_in), a = dense(a_in), b = dense(b_in),
         c = dense(c_in), d = dense(d_in);
  Tensor y = Tensor::empty(u.shape(), u.dtype(), u.device());
  if (y.numel() > 0)
    backend_of(u).selective_scan(u.view(), delta.view(), a.view(), b.view(), c.view(), d.view(),
                                 y.view());
  return record("selective_scan", y, {u_in, delta_in, a_in, b_in, c_in, d_in},
                [u = u.detach(), delta = delta.detach(), a = a.detach(), b = b.detach(),
                 c = c.detach(), d = d.detach()](const Tensor& grad) {
                  Tensor dy = dense(grad);
                  auto like = [](const Tensor& t) {
                    return Tensor::empty(t.shape(), t.dtype(), t.device());
                  };
                  Tensor du = like(u), ddelta = like(delta), da = like(a), db = like(b),
                         dc = like(c), dd = like(d);
                  if (u.numel() > 0) {
                    backend_of(u).selective_scan_backward(
                        u.view(), delta.view(), a.view(), b.view(), c.view(), d.view(), dy.view(),
                        du.view(), ddelta.view(), da.view(), db.view(), dc.view(), dd.view());
                  } else {  // no token: every sum over tokens is empty
                    for (Tensor* t : {&da, &dd})
                      *t = Tensor::zeros(t->shape(), t->dtype(), t->device());
                  }
                  return std::vector<Tensor>{du, ddelta, da, db, dc, dd};
                });
}

}  // namespace mixlab
