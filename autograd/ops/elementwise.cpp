// Elementwise ops: forward through one backend kernel, backward written with other ops (so a
// new backend never needs new gradient code).
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  check_same(name, {&a, &b});
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  if (out.numel() > 0)
    backend_of(a).binary(op, broadcast_view(a, shape), broadcast_view(b, shape), out.view());
  return out;
}

Tensor unary_forward(UnaryOp op, const char* name, const Tensor& x, double alpha = 0) {
  check_same(name, {&x});
  Tensor in = dense(x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) backend_of(x).unary(op, in.view(), out.view(), alpha);
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return record("add", binary_forward(BinaryOp::Add, "add", a, b), {a, b},
                [sa = a.shape(), sb = b.shape()](const Tensor& g) {
                  return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
                });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return record("sub", binary_forward(BinaryOp::Sub, "sub", a, b), {a, b},
                [sa = a.shape(), sb = b.shape()](const Tensor& g) {
                  return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
                });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return record("mul", binary_forward(BinaryOp::Mul, "mul", a, b), {a, b}, [a, b](const Tensor& g) {
    Tensor ga = a.requires_grad() ? sum_to(mul(g, b), a.shape()) : Tensor();
    Tensor gb = b.requires_grad() ? sum_to(mul(g, a), b.shape()) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  return record("div", binary_forward(BinaryOp::Div, "div", a, b), {a, b}, [a, b](const Tensor& g) {
    Tensor gq = div(g, b);
    Tensor ga = a.requires_grad() ? sum_to(gq, a.shape()) : Tensor();
    // d(a/b)/db = -a/b² = -(a/b)/b
    Tensor gb = b.requires_grad() ? sum_to(neg(mul(gq, div(a, b))), b.shape()) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
}

Tensor add(const Tensor& a, double b) {
  return record("add_scalar", unary_forward(UnaryOp::AddScalar, "add", a, b), {a},
                [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor mul(const Tensor& a, double b) {
  return record("mul_scalar", unary_forward(UnaryOp::MulScalar, "mul", a, b), {a},
                [b](const Tensor& g) { return std::vector<Tensor>{mul(g, b)}; });
}

Tensor neg(const Tensor& x) {
  return record("neg", unary_forward(UnaryOp::Neg, "neg", x), {x},
                [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  Tensor y = unary_forward(UnaryOp::Exp, "exp", x);
  return record("exp", y, {x},
                [y = y.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, y)}; });
}

Tensor log(const Tensor& x) {
  return record("log", unary_forward(UnaryOp::Log, "log", x), {x},
                [x](const Tensor& g) { return std::vector<Tensor>{div(g, x)}; });
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary_forward(UnaryOp::Sqrt, "sqrt", x);
  return record("sqrt", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{div(mul(g, 0.5), y)};
  });
}

Tensor pow(const Tensor& x, double p) {
  return record(
      "pow", unary_forward(UnaryOp::PowScalar, "pow", x, p), {x},
      [x, p](const Tensor& g) { return std::vector<Tensor>{mul(mul(g, pow(x, p - 1)), p)}; });
}

Tensor abs(const Tensor& x) {
  return record("abs", unary_forward(UnaryOp::Abs, "abs", x), {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{mul(g, unary_forward(UnaryOp::Sign, "abs", x))};
  });
}

Tensor relu(const Tensor& x) {
  return record("relu", unary_forward(UnaryOp::Relu, "relu", x), {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{binary_forward(BinaryOp::ReluGrad, "relu", g, x)};
  });
}

Tensor gelu(const Tensor& x, GeluForm form) {
  bool erf = form == GeluForm::Erf;
  return record("gelu", unary_forward(erf ? UnaryOp::GeluErf : UnaryOp::GeluTanh, "gelu", x), {x},
                [x, erf](const Tensor& g) {
                  UnaryOp d = erf ? UnaryOp::GeluErfGrad : UnaryOp::GeluTanhGrad;
                  return std::vector<Tensor>{mul(g, unary_forward(d, "gelu", x))};
                });
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = unary_forward(UnaryOp::Sigmoid, "sigmoid", x);
  return record("sigmoid", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, mul(y, add(neg(y), 1.0)))};  // σ(1-σ)
  });
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary_forward(UnaryOp::Tanh, "tanh", x);
  return record("tanh", y, {x}, [y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{mul(g, add(neg(mul(y, y)), 1.0))};  // 1 - tanh²
  });
}

Tensor sin(const Tensor& x) {
  return record("sin", unary_forward(UnaryOp::Sin, "sin", x), {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{mul(g, cos(x))};  // d sin = cos
  });
}

Tensor cos(const Tensor& x) {
  return record("cos", unary_forward(UnaryOp::Cos, "cos", x), {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{mul(g, neg(sin(x)))};  // d cos = −sin
  });
}

Tensor elu_plus_one(const Tensor& x) {
  return record("elu_plus_one", unary_forward(UnaryOp::EluPlusOne, "elu_plus_one", x), {x},
                [x](const Tensor& g) {
                  return std::vector<Tensor>{
                      mul(g, unary_forward(UnaryOp::EluPlusOneGrad, "elu_plus_one", x))};
                });
}

Tensor softplus(const Tensor& x) {
  return record("softplus", unary_forward(UnaryOp::Softplus, "softplus", x), {x},
                [x](const Tensor& g) { return std::vector<Tensor>{mul(g, sigmoid(x))}; });
}

Tensor equal(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  return binary_forward(BinaryOp::Equal, "equal", a, b);
}

Tensor greater(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  return binary_forward(BinaryOp::Greater, "greater", a, b);
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return record("maximum", binary_forward(BinaryOp::Maximum, "maximum", a, b), {a, b},
                [a, b](const Tensor& g) {
                  Tensor b_wins = greater(b, a);  // ties go to a
                  Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
                  return std::vector<Tensor>{sum_to(where(b_wins, zero, g), a.shape()),
                                             sum_to(where(b_wins, g, zero), b.shape())};
                });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same("where", {&a, &b});
  check(cond.device() == a.device(), "where: condition on ", cond.device().str(), ", values on ",
        a.device().str());
  Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  if (out.numel() > 0)
    backend_of(a).where(broadcast_view(cond, shape), broadcast_view(a, shape),
                        broadcast_view(b, shape), out.view());
  return record("where", out, {a, b}, [cond, sa = a.shape(), sb = b.shape()](const Tensor& g) {
    Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
    return std::vector<Tensor>{sum_to(where(cond, g, zero), sa), sum_to(where(cond, zero, g), sb)};
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return where(mask, Tensor::full({}, value, x.dtype(), x.device()), x);
}

}  // namespace mixlab
