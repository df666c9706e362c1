// The residual branch of a block, x + dropout(h) and the layer norm that follows it, as one row
// kernel (add_dropout_layer_norm) that draws the dropout mask itself. Two recorded nodes share
// that forward: the sum (its gradient goes to x as is and to h through the regenerated mask) and
// the norm (layer_norm's own backward), so the residual sum can feed later ops too.
#include "autograd/ops/layer_norm_rule.h"

namespace mixlab {
using namespace ops_detail;

namespace {

// Runs the fused kernel; `with_norm` false computes the sum alone (y, mean, rstd not written).
ResidualNorm run_residual(const char* op, const Tensor& x, const Tensor& h, double p, uint64_t seed,
                          bool with_norm, const Tensor& gamma, const Tensor& beta, double eps) {
  check(p >= 0.0 && p < 1.0, op, ": dropout rate ", p, " must be in [0, 1)");
  check_same(op, {&x, &h});
  if (x.shape() != h.shape())
    fail(op, ": residual ", shape_str(x.shape()), " and branch ", shape_str(h.shape()),
         " must have the same shape");
  check(x.dim() >= 1, op, ": input must have at least one axis, got ", shape_str(x.shape()));
  if (with_norm) check_layer_norm_params(op, x, gamma, beta);
  int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  Tensor xin = dense(x), hin = dense(h);
  Tensor g = with_norm && gamma.defined() ? dense(gamma) : Tensor();
  Tensor b = with_norm && beta.defined() ? dense(beta) : Tensor();
  Tensor sum = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor y, mu, rstd;
  if (with_norm) {
    y = Tensor::empty(x.shape(), x.dtype(), x.device());
    mu = Tensor::empty({rows}, x.dtype(), x.device());
    rstd = Tensor::empty({rows}, x.dtype(), x.device());
  }
  if (rows > 0)
    backend_of(x).add_dropout_layer_norm(xin.view(), hin.view(), view_or_none(g, x.dtype()),
                                         view_or_none(b, x.dtype()), sum.view(),
                                         view_or_none(y, x.dtype()), view_or_none(mu, x.dtype()),
                                         view_or_none(rstd, x.dtype()), rows, cols, p, seed, eps);
  Tensor saved = sum;  // the norm's backward reads the sum's values, not its history
  sum = record("add_dropout", sum, {x, h}, [p, seed](const Tensor& grad) {
    return std::vector<Tensor>{grad, p > 0 ? dropout(grad, p, true, seed) : grad};
  });
  if (!with_norm) return {sum, Tensor()};
  return {sum, record_layer_norm(y, sum, gamma, beta, saved.detach(), g, b, mu, rstd, rows, cols)};
}

}  // namespace

ResidualNorm add_dropout_layer_norm(const Tensor& x, const Tensor& h, double p, uint64_t seed,
                                    const Tensor& gamma, const Tensor& beta, double eps) {
  return run_residual("add_dropout_layer_norm", x, h, p, seed, true, gamma, beta, eps);
}

Tensor add_dropout(const Tensor& x, const Tensor& h, double p, uint64_t seed) {
  return run_residual("add_dropout", x, h, p, seed, false, Tensor(), Tensor(), 0.0).sum;
}

}  // namespace mixlab
