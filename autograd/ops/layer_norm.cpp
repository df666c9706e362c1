// Layer normalisation over the last axis (biased variance), with the fused backward kernel
// that yields dx, dgamma and dbeta in one pass.
#include "autograd/gradient_routing.h"
#include "autograd/ops/layer_norm_rule.h"

namespace mixlab {
namespace ops_detail {

void check_layer_norm_params(const char* op, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta) {
  int64_t cols = x.size(-1);
  for (const Tensor* p : {&gamma, &beta}) {
    if (!p->defined()) continue;
    check_same(op, {&x, p});
    if (p->shape() != Shape{cols})
      fail(op, ": input ", shape_str(x.shape()), " needs gain/bias of shape [", cols, "], got ",
           shape_str(p->shape()));
  }
}

Tensor record_layer_norm(const Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& in, const Tensor& g, const Tensor& b, const Tensor& mu,
                         const Tensor& rstd, int64_t rows, int64_t cols) {
  return record(
      "layer_norm", y, {x, gamma, beta},
      [x, in, g, b, gamma, beta, mu, rstd, rows, cols](const Tensor& grad) {
        Tensor gd = dense(grad);
        // Added to x's gradient from its other consumers where the engine lets it (a pre-norm
        // block's residual stream: node.h's take_pending_gradient), else a fresh tensor.
        Tensor dx = take_pending_gradient(x, in.shape(), in.dtype(), in.device());
        const bool accumulate = dx.defined();
        if (!accumulate) dx = Tensor::empty(in.shape(), in.dtype(), in.device());
        // Written straight into gamma's and beta's grad slots where they have them.
        Tensor dg =
            g.defined() ? leaf_gradient_buffer(gamma, {cols}, in.dtype(), in.device()) : Tensor();
        Tensor db =
            b.defined() ? leaf_gradient_buffer(beta, {cols}, in.dtype(), in.device()) : Tensor();
        if (rows > 0) {
          backend_of(in).layer_norm_backward(
              gd.view(), in.view(), mu.view(), rstd.view(), view_or_none(g, in.dtype()), dx.view(),
              view_or_none(dg, in.dtype()), view_or_none(db, in.dtype()), rows, cols, accumulate);
        } else {
          if (dg.defined()) dg.fill_(0.0);
          if (db.defined()) db.fill_(0.0);
        }
        return std::vector<Tensor>{dx, dg, db};
      });
}

}  // namespace ops_detail

using namespace ops_detail;

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  check_same("layer_norm", {&x});
  int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  check_layer_norm_params("layer_norm", x, gamma, beta);
  Tensor in = dense(x);
  Tensor g = gamma.defined() ? dense(gamma) : Tensor();
  Tensor b = beta.defined() ? dense(beta) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mu = Tensor::empty({rows}, x.dtype(), x.device());
  Tensor rstd = Tensor::empty({rows}, x.dtype(), x.device());
  if (rows > 0)
    backend_of(x).layer_norm(in.view(), view_or_none(g, x.dtype()), view_or_none(b, x.dtype()),
                             y.view(), mu.view(), rstd.view(), rows, cols, eps);
  return record_layer_norm(y, x, gamma, beta, in, g, b, mu, rstd, rows, cols);
}

Tensor logcumsumexp(const Tensor& x, int64_t axis) {
  check_same("logcumsumexp", {&x});
  int a = normalize_axis(axis, x.dim(), "logcumsumexp", x.shape());
  int64_t outer = 1, inner = 1, n = x.shape()[a];
  for (int i = 0; i < a; ++i) outer *= x.shape()[i];
  for (int i = a + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  Tensor in = dense(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) backend_of(x).logcumsumexp(in.view(), outer, n, inner, y.view());
  return record("logcumsumexp", y, {x}, [in, y = y.detach(), outer, n, inner](const Tensor& g) {
    Tensor gd = dense(g);
    Tensor dx = Tensor::empty(in.shape(), in.dtype(), in.device());
    if (dx.numel() > 0)
      backend_of(in).logcumsumexp_backward(in.view(), y.view(), gd.view(), outer, n, inner,
                                           dx.view());
    return std::vector<Tensor>{dx};
  });
}

}  // namespace mixlab
