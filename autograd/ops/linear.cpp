// Linear layers with their bias (and the FFN's GELU) applied in one pass over the product's
// output (the bias_act kernel) instead of a broadcast add and a unary op, each a pass of its own.
// When the product is fresh and read by nothing else, the bias goes into its storage in place.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

void check_linear_shapes(const char* op, const Tensor& x, const Tensor& weight) {
  check(weight.dim() == 2, op, ": weight must be [out, in], got ", shape_str(weight.shape()));
  if (x.dim() < 1 || x.size(-1) != weight.size(1))
    fail(op, ": input ", shape_str(x.shape()), " has ", x.dim() < 1 ? 0 : x.size(-1),
         " features but weight ", shape_str(weight.shape()), " expects ", weight.size(1));
}

// y + bias along the last axis, then GELU when `gelu`. With `in_place` (y is a product that only
// this op reads, and its backward does not need its values) the sum overwrites y's storage.
Tensor bias_act_op(const char* op, const Tensor& y, const Tensor& bias, bool gelu, bool in_place) {
  check_same(op, {&y, &bias});
  check(y.dim() >= 1, op, ": input must have at least one axis, got ", shape_str(y.shape()));
  int64_t cols = y.size(-1), rows = cols ? y.numel() / cols : 0;
  if (bias.shape() != Shape{cols})
    fail(op, ": input ", shape_str(y.shape()), " needs a bias of shape [", cols, "], got ",
         shape_str(bias.shape()));
  Tensor in = dense(y), b = dense(bias);
  in_place = in_place && in.is_contiguous() && in.raw_data() == y.raw_data();
  Tensor pre = in_place ? in.detach() : Tensor::empty(y.shape(), y.dtype(), y.device());
  Tensor out = gelu ? Tensor::empty(y.shape(), y.dtype(), y.device()) : pre;
  if (rows > 0)
    backend_of(y).bias_act(in.view(), b.view(), pre.view(), gelu ? out.view() : no_view(y.dtype()),
                           rows, cols);
  if (!gelu)  // the add's rule: the gradient passes to y, and sums over rows for the bias
    return record("bias_add", out, {y, bias}, [shape = bias.shape()](const Tensor& g) {
      return std::vector<Tensor>{g, sum_to(g, shape)};
    });
  return record("bias_gelu", out, {y, bias}, [pre = pre.detach(), rows, cols](const Tensor& g) {
    Tensor gd = dense(g);
    Tensor dpre = Tensor::empty(pre.shape(), pre.dtype(), pre.device());
    Tensor dbias = Tensor::empty({cols}, pre.dtype(), pre.device());
    if (rows > 0)
      backend_of(pre).bias_gelu_backward(gd.view(), pre.view(), dpre.view(), dbias.view(), rows,
                                         cols);
    else
      dbias.fill_(0.0);
    return std::vector<Tensor>{dpre, dbias};
  });
}

}  // namespace

Tensor bias_add(const Tensor& x, const Tensor& bias) {
  return bias_act_op("bias_add", x, bias, false, false);
}

Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  return bias_act_op("bias_gelu", x, bias, true, false);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear_shapes("linear", x, weight);
  Tensor y = matmul(x, transpose(weight, 0, 1));  // matmul's backward reads x and W, not y
  return bias.defined() ? bias_act_op("linear", y, bias, false, true) : y;
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear_shapes("linear_gelu", x, weight);
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? bias_act_op("linear_gelu", y, bias, true, true) : gelu(y, GeluForm::Erf);
}

}  // namespace mixlab
