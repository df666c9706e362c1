// Linear layers with their bias (and the FFN's GELU) applied to the product's output while it is
// still in cache: the backend's gemm_epilogue kernel runs the row pass of bias_act on each block
// of rows as the product computes it, instead of a pass of its own over the whole output. The
// FFN (feed_forward) also fuses its backward: the second layer's input gradient dY·W₂ gets GELU's
// gradient in the same epilogue, so dH is never written and read back.
//
// The graph is one node per layer (one for the whole FFN), whose rule is the layer's backward:
//   y = x Wᵀ + b:  dx = dy W,  dW = dyᵀ x,  db = Σ_rows dy.
// Shapes or layouts the fused kernel does not take (no bias, no rows, an empty inner axis) go
// through matmul and the bias_act kernel instead, with the same numbers.
#include "autograd/gradient_routing.h"
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

// The product C [m, n] = a [m, k] · b [k, n] into c: a contiguous, b read through a transpose
// flag when it is a transposed view (`b` is replaced by a dense copy where its layout needs one,
// and must outlive the call), c contiguous [m, n].
GemmArgs product_args(const Tensor& a, Tensor& b, const Tensor& c) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  MatrixLayout lb = layout_of(k, n, b.strides()[0], b.strides()[1]);
  if (!lb.ok) b = dense(b), lb = layout_of(k, n, b.strides()[0], b.strides()[1]);
  GemmArgs g;
  g.dtype = a.dtype();
  g.m = m, g.n = n, g.k = k;
  g.a = a.raw_data(), g.lda = k;
  g.b = b.raw_data(), g.ldb = lb.ld, g.trans_b = lb.transposed;
  g.c = c.raw_data(), g.ldc = n;
  return g;
}

// C [m, n] = a [m, k] · b [k, n], then the epilogue on C's rows (bias [n] for all but Times;
// aux [m, n]: gelu's output for BiasGelu and BiasGeluSlope, the factor for Times). a is contiguous,
// b is read through a transpose flag when it is a transposed view. Not recorded: the callers record
// the layer. Needs m, n, k ≥ 1.
Tensor product_with_epilogue(const Tensor& a, const Tensor& b_in, GemmEpilogue epilogue,
                             const Tensor& bias, const Tensor& aux) {
  Tensor b = b_in;
  Tensor c = Tensor::empty({a.size(0), b.size(1)}, a.dtype(), a.device());
  backend_of(a).gemm_epilogue(product_args(a, b, c), epilogue, view_or_none(bias, a.dtype()),
                              view_or_none(aux, a.dtype()));
  return c;
}

// x [..., in] as the contiguous matrix [rows, in] the products read (a copy only when x's
// layout needs one), off the record.
Tensor rows_of(const Tensor& x) {
  NoGradGuard no_grad;
  return reshape(dense(x), {-1, x.size(-1)});
}

// Whether the fused kernel takes y = x Wᵀ + b: a bias, at least one row, and a non-empty inner
// axis (shapes already checked).
bool fusable(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return bias.defined() && x.numel() > 0 && weight.numel() > 0;
}

void check_bias(const char* op, const Tensor& weight, const Tensor& bias) {
  if (bias.defined() && bias.shape() != Shape{weight.size(0)})
    fail(op, ": weight ", shape_str(weight.shape()), " needs a bias of shape [", weight.size(0),
         "], got ", shape_str(bias.shape()));
}

// x's shape with its last axis resized to `features`.
Shape with_features(const Tensor& x, int64_t features) {
  Shape s = x.shape();
  s.back() = features;
  return s;
}

// Which of a layer's inputs need gradients.
struct Needs {
  bool x, weight, bias;
};
Needs needs_of(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return {x.requires_grad(), weight.requires_grad(), bias.defined() && bias.requires_grad()};
}

// The gradients of y = x Wᵀ + b that are needed, from dy [rows, out] and x as [rows, in]
// (x_shape: the caller's shape of x): {dx, dW, db}.
// dW = dyᵀ x2 and db = Σ_rows dy from one product that sums dy's rows as it reads them
// (gemm_epilogue RowSums): dy is read once for both, not once more by a reduction. Both are
// written straight into the parameters' grad slots where they have them (leaf_gradient_buffer).
std::pair<Tensor, Tensor> weight_and_bias_gradients(const Tensor& dy_in, const Tensor& x2,
                                                    const Tensor& weight, const Tensor& bias) {
  Tensor dy = dy_in.is_contiguous() ? dy_in : dense(dy_in);
  const int64_t rows = dy.size(0), out = dy.size(1), in = x2.size(1);
  Tensor gw = leaf_gradient_buffer(weight, {out, in}, dy.dtype(), dy.device());
  Tensor gb = leaf_gradient_buffer(bias, {out}, dy.dtype(), dy.device());
  GemmArgs g;
  g.dtype = dy.dtype();
  g.m = out, g.n = in, g.k = rows;
  g.a = dy.raw_data(), g.lda = out, g.trans_a = true;  // dyᵀ: dy stored [rows, out]
  g.b = x2.raw_data(), g.ldb = in;
  g.c = gw.raw_data(), g.ldc = in;
  backend_of(dy).gemm_epilogue(g, GemmEpilogue::RowSums, no_view(dy.dtype()), gb.view());
  return {gw, gb};
}

// dx = dy W (dy [rows, out] contiguous). Where x's gradient from its other consumers is pending
// and the engine hands it out (node.h's take_pending_gradient: the encoder's output, which every
// decoder layer's keys and values read, and a residual stream read by the next block), the
// product adds into it (beta = 1) instead of the engine adding a fresh product in a pass of its
// own (a write and a read of [rows, in]). On the tall kernel that sum is the engine's, bit for bit
// (register_tile.h: the product, then C added in one rounding).
Tensor input_gradient(const Tensor& dy, const Tensor& x, const Shape& x_shape,
                      const Tensor& weight) {
  // (An undefined x, or none pending in dy's shape, dtype and device: undefined.)
  Tensor pending = take_pending_gradient(x, x_shape, dy.dtype(), dy.device());
  if (!pending.defined()) return reshape(matmul(dy, weight), x_shape);
  Tensor w = weight;
  GemmArgs g = product_args(dy, w, pending);
  g.beta = 1.0;
  if (g.m > 0 && g.n > 0 && g.k > 0) backend_of(dy).gemm(g);  // (k = 0: dy W adds nothing)
  return pending;
}

// x: the layer's input as the caller recorded it (for its pending gradient; undefined: none).
std::vector<Tensor> linear_gradients(const Tensor& dy, const Tensor& x, const Tensor& x2,
                                     const Shape& x_shape, const Tensor& weight, const Tensor& bias,
                                     Needs needs) {
  Tensor gx = needs.x ? input_gradient(dy, x, x_shape, weight) : Tensor();
  if (needs.weight && needs.bias && x2.is_contiguous()) {
    auto [gw, gb] = weight_and_bias_gradients(dy, x2, weight, bias);
    return {gx, gw, gb};
  }
  Tensor gw = needs.weight ? matmul(transpose(dy, 0, 1), x2) : Tensor();
  Tensor gb = needs.bias ? sum(dy, {0}) : Tensor();
  return {gx, gw, gb};
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
  check_bias("linear", weight, bias);
  if (!fusable(x, weight, bias)) {
    Tensor y = matmul(x, transpose(weight, 0, 1));  // matmul's backward reads x and W, not y
    return bias.defined() ? bias_act_op("linear", y, bias, false, true) : y;
  }
  check_same("linear", {&x, &weight, &bias});
  Tensor x2 = rows_of(x);
  Tensor y =
      product_with_epilogue(x2, transpose(weight, 0, 1), GemmEpilogue::Bias, dense(bias), Tensor());
  Tensor out = make_view(y, with_features(x, weight.size(0)),
                         contiguous_strides(with_features(x, weight.size(0))), 0);
  return record("linear", out, {x, weight, bias},
                [x, x2, x_shape = x.shape(), weight, bias,
                 needs = needs_of(x, weight, bias)](const Tensor& g) {
                  Tensor dy = reshape(dense(g), {-1, weight.size(0)});
                  return linear_gradients(dy, x, x2, x_shape, weight, bias, needs);
                });
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear_shapes("linear_gelu", x, weight);
  check_bias("linear_gelu", weight, bias);
  if (!fusable(x, weight, bias)) {
    Tensor y = matmul(x, transpose(weight, 0, 1));
    return bias.defined() ? bias_act_op("linear_gelu", y, bias, true, true)
                          : gelu(y, GeluForm::Erf);
  }
  check_same("linear_gelu", {&x, &weight, &bias});
  // As feed_forward's first layer: the product's epilogue writes h = gelu(pre) and, when a
  // backward will need it, GELU's slope gelu'(pre) (erf taken once for both). The backward then
  // multiplies the incoming gradient by the slope and sums the bias's gradient with the weight's
  // (RowSums), where recomputing gelu'(pre) in a pass of its own (bias_gelu_backward) cost
  // aMLP's classifier 3.6% of its step.
  Tensor x2 = rows_of(x);
  const int64_t rows = x2.size(0), cols = weight.size(0);
  const bool recorded = will_record({x, weight, bias});
  Tensor h = Tensor::empty({rows, cols}, x.dtype(), x.device());
  Tensor slope = product_with_epilogue(
      x2, transpose(weight, 0, 1), recorded ? GemmEpilogue::BiasGeluSlope : GemmEpilogue::BiasGelu,
      dense(bias), h);
  Shape shape = with_features(x, cols);
  Tensor out = make_view(h, shape, contiguous_strides(shape), 0);
  if (!recorded) return out;
  return record("linear_gelu", out, {x, weight, bias},
                [x, x2, slope, x_shape = x.shape(), weight, bias, needs = needs_of(x, weight, bias),
                 cols](const Tensor& g) {
                  // dpre = g ⊙ slope, written over g when the engine's handle is its only
                  // holder (a fresh gradient, as LayerNorm's or the gMLP gate's backward gives):
                  // no new buffer to fill.
                  Tensor dpre;
                  if (g.writable_in_place()) {
                    dpre = reshape(g.detach(), {-1, cols});
                    backend_of(dpre).binary(BinaryOp::Mul, dpre.view(), slope.view(), dpre.view());
                  } else {
                    dpre = mul(reshape(dense(g), {-1, cols}), slope);
                  }
                  return linear_gradients(dpre, x, x2, x_shape, weight, bias, needs);
                });
}

Tensor feed_forward(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                    const Tensor& b2) {
  check_linear_shapes("feed_forward (first layer)", x, w1);
  check_bias("feed_forward (first layer)", w1, b1);
  check(w2.dim() == 2 && w2.size(1) == w1.size(0), "feed_forward: second weight ",
        shape_str(w2.shape()), " must be [out, ", w1.size(0), "] after the first ",
        shape_str(w1.shape()));
  check_bias("feed_forward (second layer)", w2, b2);
  if (!fusable(x, w1, b1) || !fusable(x, w2, b2)) return linear(linear_gelu(x, w1, b1), w2, b2);
  check_same("feed_forward", {&x, &w1, &b1, &w2, &b2});
  // Forward: pre = x W₁ᵀ + b₁, h = gelu(pre) and, when a backward will need it, GELU's slope
  // gelu'(pre) from one product (erf taken once for both; the backward then only multiplies,
  // where recomputing gelu' cost it a third of its product's time); y = h W₂ᵀ + b₂ from another.
  Tensor x2 = rows_of(x);
  const int64_t rows = x2.size(0), hidden = w1.size(0), out = w2.size(0);
  const bool recorded = will_record({x, w1, b1, w2, b2});
  Tensor h = Tensor::empty({rows, hidden}, x.dtype(), x.device());
  Tensor slope = product_with_epilogue(
      x2, transpose(w1, 0, 1), recorded ? GemmEpilogue::BiasGeluSlope : GemmEpilogue::BiasGelu,
      dense(b1), h);
  Tensor y = product_with_epilogue(h, transpose(w2, 0, 1), GemmEpilogue::Bias, dense(b2), Tensor());
  Shape shape = with_features(x, out);
  if (!recorded) return make_view(y, shape, contiguous_strides(shape), 0);
  return record(
      "feed_forward", make_view(y, shape, contiguous_strides(shape), 0), {x, w1, b1, w2, b2},
      [x, x2, h, slope, x_shape = x.shape(), w1, b1, w2, b2, out, first = needs_of(x, w1, b1),
       second = needs_of(h, w2, b2)](const Tensor& g) {
        // The second layer: dW₂ = dyᵀ h, db₂ = Σ dy. Then dpre = (dy W₂) ⊙ gelu'(pre) from one
        // product (the slope multiplied in its epilogue), and the first layer's rule on dpre.
        Tensor dy = reshape(dense(g), {-1, out});
        auto outer = linear_gradients(dy, Tensor(), h, h.shape(), w2, b2,
                                      {false, second.weight, second.bias});
        std::vector<Tensor> grads{Tensor(), Tensor(), Tensor(), outer[1], outer[2]};
        if (first.x || first.weight || first.bias) {
          Tensor dpre = product_with_epilogue(dy, w2, GemmEpilogue::Times, Tensor(), slope);
          auto inner = linear_gradients(dpre, x, x2, x_shape, w1, b1, first);
          grads[0] = inner[0], grads[1] = inner[1], grads[2] = inner[2];
        }
        return grads;
      });
}

}  // namespace mixlab
