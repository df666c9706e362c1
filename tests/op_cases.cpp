// The op harness's table: every kernel of backends/kernels.def, through the public ops where it
// has one (forward and backward) and through the Backend interface where it matters (views,
// aliasing, dtypes, flags). Sizes 1, 17, 1000 and those where a backend switches strategy
// (warp or block per row past 1024 columns, split reductions), non-contiguous views,
// broadcasting and edge values. Adding a kernel or an op adds rows here (tests/op_harness.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "backends/reference/selective_scan.h"
#include "tests/op_harness.h"

namespace mixlab::test {
namespace {

using In = std::vector<Tensor>;
using Out = std::vector<Tensor>;

std::string dims_str(std::initializer_list<int64_t> d) {
  std::string s = "[";
  for (int64_t v : d) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + "]";
}

// Tolerances against the reference in float64: float32 rounding of the inputs and of the
// arithmetic.
const Tol kExact{0, 0};
const Tol kF32{1e-5, 1e-6};
const Tol kF32Loose{2e-4, 2e-5};
const Tol kF64Loose{1e-9, 1e-10};

// GELU (erf form) and its derivative in double: the formulas the fused kernels' rows must give.
double gelu_exact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_exact_grad(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

void add_memory_cases(std::vector<OpCase>& t) {
  t.push_back({"copy",
               "strided views, casts, concat [7, 17, 5]",
               {Input::uniform({7, 17, 5}, 4, -10, 10)},
               [](const Ctx& c, const In& in) {
                 NoGradGuard no_grad;
                 const Tensor& x = in[0];
                 Tensor dst = Tensor::zeros({5, 7}, c.dtype, c.device);
                 transpose(dst, 0, 1).copy_(squeeze(narrow(x, 1, 2, 1), 1));  // strided dst
                 return Out{contiguous(transpose(x, 0, 2)),
                            contiguous(narrow(x, 1, 3, 10)),
                            contiguous(permute(x, {1, 2, 0})),
                            contiguous(expand(narrow(x, 0, 0, 1), {4, 17, 5})),
                            cast(cast(transpose(x, 1, 2), DType::F32), DType::F64),
                            dst,
                            concat({x, x}, 1)};
               },
               Tol{1e-7, 0},
               kExact});
  // Swapped inner axes (the float32 copy's blocked transposes, transpose_copy.h): sizes that are
  // not multiples of 8 or 16 lanes, one matrix and a batch, a source whose rows are narrowed,
  // and mlp-mixer's [B, N, d] -> [B, d, N].
  t.push_back({"copy",
               "transposed inner axes [3, 37, 21], [50, 17], [2, 49, 128]",
               {Input::uniform({3, 37, 21}, 6, -10, 10), Input::uniform({50, 17}, 7, -10, 10),
                Input::uniform({2, 49, 128}, 8, -10, 10)},
               [](const Ctx&, const In& in) {
                 NoGradGuard no_grad;
                 return Out{contiguous(transpose(in[0], 1, 2)),
                            contiguous(transpose(narrow(in[0], 2, 1, 19), 1, 2)),
                            contiguous(transpose(in[1], 0, 1)), contiguous(transpose(in[2], 1, 2)),
                            contiguous(transpose(contiguous(transpose(in[2], 1, 2)), 1, 2))};
               },
               Tol{1e-7, 0},
               kExact});
  // Casts to int32 truncate: integer-valued inputs keep float32 and float64 runs comparable.
  t.push_back({"copy",
               "casts to and from int32 [17, 9]",
               {Input::ints({17, 9}, 5)},
               [](const Ctx&, const In& in) {
                 NoGradGuard no_grad;
                 Tensor i = cast(transpose(in[0], 0, 1), DType::I32);
                 return Out{i, cast(i, DType::F64)};
               },
               kExact,
               kExact});
  for (int64_t n : {1, 17, 1000}) {
    t.push_back({"fill",
                 "full, zeros, ones, a transposed fill_ n=" + std::to_string(n),
                 {},
                 [n](const Ctx& c, const In&) {
                   Tensor z = Tensor::zeros({3, n}, c.dtype, c.device);
                   transpose(z, 0, 1).fill_(7.0);  // non-contiguous fill
                   Tensor i = Tensor::full({n}, -3.0, DType::I32, c.device);
                   return Out{Tensor::full({n, 3}, -2.5, c.dtype, c.device), z,
                              Tensor::ones({n}, c.dtype, c.device), i};
                 },
                 kExact,
                 kExact});
  }
}

void add_elementwise_cases(std::vector<OpCase>& t) {
  // The unary kernel: every op of MIXLAB_UNARY_OPS, on sizes 1, 17, 1000.
  for (UnaryOp op : test::all_unary_ops()) {
    bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::PowScalar;
    double alpha = op == UnaryOp::PowScalar ? 1.7 : -0.37;
    for (int64_t n : {1, 17, 1000}) {
      t.push_back({"unary",
                   std::string(unary_name(op)) + " n=" + std::to_string(n),
                   {positive ? Input::uniform({n}, 10 + n, 0.1, 3.0)
                             : Input::uniform({n}, 10 + n, -4.0, 4.0)},
                   [op, alpha](const Ctx& c, const In& in) {
                     Tensor y = Tensor::empty(in[0].shape(), c.dtype, c.device);
                     c.kernels().unary(op, in[0].view(), y.view(), alpha);
                     return Out{y};
                   },
                   kF32,
                   Tol{1e-10, 1e-12}});
    }
    // Edge values: zeros, signs, and magnitudes where exp over- and underflows.
    std::vector<double> edge = {-100, -20, -2, -0.5, 0, 0.5, 2, 20, 60};
    if (positive) edge = {1e-30, 1e-3, 0.5, 1, 2, 1e3, 1e10};
    int64_t n = static_cast<int64_t>(edge.size());
    t.push_back({"unary",
                 std::string(unary_name(op)) + " edge values",
                 {Input::given({n}, edge)},
                 [op, alpha](const Ctx& c, const In& in) {
                   Tensor y = Tensor::empty(in[0].shape(), c.dtype, c.device);
                   c.kernels().unary(op, in[0].view(), y.view(), alpha);
                   return Out{y};
                 },
                 // float32 exp and erf are polynomials (backends/cpu/simd/fast_math.h) clamped
                 // where float32 under- or overflows: tails agree to float32's absolute resolution.
                 Tol{2e-6, 1e-6},
                 Tol{1e-10, 1e-300}});
  }

  // The ops over the unary kernel, forward and backward, through a transposed view.
  struct Fn {
    const char* name;
    Tensor (*f)(const Tensor&);
  };
  const Fn fns[] = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(add(abs(x), 0.5)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(add(abs(x), 0.5)); }},
      {"pow", [](const Tensor& x) { return pow(add(abs(x), 0.5), 2.5); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu erf", [](const Tensor& x) { return gelu(x, GeluForm::Erf); }},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluForm::Tanh); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sin", [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }},
      {"neg and scalar ops", [](const Tensor& x) { return mul(add(neg(x), 0.25), 3.0); }},
  };
  for (const Fn& fn : fns) {
    t.push_back({"unary",
                 std::string(fn.name) + " op through a transposed view [1000, 17]",
                 {Input::leaf({1000, 17}, 21, -3, 3)},
                 [f = fn.f](const Ctx&, const In& in) { return Out{f(transpose(in[0], 0, 1))}; },
                 kF32Loose,
                 kF64Loose});
    t.push_back({"unary",
                 std::string(fn.name) + " op [3, 5]",
                 {Input::leaf({3, 5}, 23, -3, 3)},
                 [f = fn.f](const Ctx&, const In& in) { return Out{f(in[0])}; },
                 kF32Loose,
                 kF64Loose,
                 /*grad=*/true});
  }

  // Composite ops checked against their formula, evaluated in double on the float64 inputs.
  auto against_formula = [&](const char* label, uint64_t seed, double lo, double hi,
                             Tensor (*op)(const Tensor&), double (*formula)(double)) {
    t.push_back({"unary",
                 label,
                 {Input::leaf({4, 5}, seed, lo, hi)},
                 [op](const Ctx&, const In& in) { return Out{op(in[0])}; },
                 kF32Loose,
                 Tol{1e-12, 1e-15},
                 /*grad=*/true,
                 {DType::F32, DType::F64},
                 [formula](const std::vector<std::vector<double>>& v) {
                   std::vector<double> y;
                   for (double x : v[0]) y.push_back(formula(x));
                   return y;
                 }});
  };
  against_formula("elu_plus_one op against relu(x) + exp(-relu(-x)) [4, 5]", 26, -6, 6,
                  elu_plus_one,
                  [](double x) { return std::max(x, 0.0) + std::exp(-std::max(-x, 0.0)); });
  against_formula("softplus op against max(x, 0) + log1p(exp(-|x|)) [4, 5]", 25, -30, 30, softplus,
                  [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); });

  // The binary kernel: every op over broadcast strided views, and in place (out aliases a).
  struct Bcast {
    Shape a, b;
    bool transpose_a;
  };
  const Bcast shapes[] = {{{17, 1000}, {1000}, false}, {{3, 1, 5}, {1, 4, 5}, false},
                          {{1}, {1}, false},           {{1000, 17}, {17, 1}, true},
                          {{2, 3, 4}, {}, false},      {{17}, {17}, false}};
  for (BinaryOp op : test::all_binary_ops()) {
    bool ints = op == BinaryOp::Equal || op == BinaryOp::Greater || op == BinaryOp::Maximum ||
                op == BinaryOp::Minimum || op == BinaryOp::ReluGrad;  // (ReluGrad: x < 0, 0, > 0)
    for (const Bcast& s : shapes) {
      t.push_back({"binary",
                   std::string(binary_name(op)) + " " + shape_str(s.a) + " " + shape_str(s.b) +
                       (s.transpose_a ? " a transposed" : ""),
                   {ints ? Input::ints(s.a, 30) : Input::uniform(s.a, 30),
                    ints ? Input::ints(s.b, 60) : Input::uniform(s.b, 60, 0.5, 2.0)},
                   [op, s](const Ctx& c, const In& in) {
                     Tensor av = s.transpose_a ? transpose(in[0], 0, 1) : in[0];
                     Shape shape = broadcast_shapes(av.shape(), in[1].shape(), "harness");
                     Tensor ae = expand(av, shape), be = expand(in[1], shape);
                     Tensor out = Tensor::empty(shape, c.dtype, c.device);
                     c.kernels().binary(op, ae.view(), be.view(), out.view());
                     Tensor acc = contiguous(ae).clone();
                     c.kernels().binary(op, acc.view(), be.view(), acc.view());
                     return Out{out, acc};
                   },
                   kF32,
                   kExact});
    }
  }
  auto broadcast_ops = [](const Ctx&, const In& in) {
    const Tensor &a = in[0], &b = in[1], &c = in[2];
    Tensor y = add(div(mul(sub(a, c), b), add(b, 1.0)), maximum(a, c));
    return Out{add(y, mul(equal(a, a), greater(a, c)))};
  };
  t.push_back(
      {"binary",
       "broadcast ops through autograd [4, 17, 33]",
       {Input::leaf({4, 17, 33}, 70), Input::leaf({17, 1}, 71, 0.5, 2.0), Input::leaf({33}, 72)},
       broadcast_ops,
       kF32Loose,
       kF64Loose});
  t.push_back(
      {"binary",
       "broadcast ops through autograd [2, 3, 4]",
       {Input::leaf({2, 3, 4}, 74), Input::leaf({3, 1}, 75, 0.5, 2.0), Input::leaf({4}, 76)},
       broadcast_ops,
       kF32Loose,
       kF64Loose,
       true});

  for (DType cond_dtype : {DType::F32, DType::F64, DType::I32}) {
    t.push_back(
        {"where",
         std::string("condition ") + dtype_name(cond_dtype) + " [17, 1000]",
         {Input::ints({17, 1}, 80), Input::uniform({1000}, 81), Input::uniform({1000, 17}, 82)},
         [cond_dtype](const Ctx& c, const In& in) {
           Shape shape{17, 1000};
           Tensor out = Tensor::empty(shape, c.dtype, c.device);
           c.kernels().where(expand(cast(in[0], cond_dtype), shape).view(),
                             expand(in[1], shape).view(), transpose(in[2], 0, 1).view(),
                             out.view());
           return Out{out};
         },
         kF32,
         kExact});
  }
  t.push_back({"where",
               "where and masked_fill through autograd [5, 17]",
               {Input::leaf({5, 17}, 83), Input::leaf({17}, 84)},
               [](const Ctx& c, const In& in) {
                 Tensor mask = greater(in[0].detach(), Tensor::zeros({1}, c.dtype, c.device));
                 Tensor z = add(where(mask, in[0], in[1]), masked_fill(in[0], mask, -3.0));
                 return Out{mul(z, z)};
               },
               kF32Loose,
               kF64Loose,
               true});
}

void add_reduction_cases(std::vector<OpCase>& t) {
  struct Case {
    int64_t outer, n, inner;
  };
  // Rows (inner 1): tiny, warp and block rows, split long rows; columns: direct and split.
  const Case cases[] = {{1, 1, 1},      {17, 1, 1},     {1, 17, 1},     {3, 1000, 1},
                        {1000, 17, 1},  {1000, 2, 1},   {2, 5, 17},     {4, 1000, 17},
                        {100, 3, 1000}, {1, 300000, 1}, {1, 100003, 1}, {3, 70001, 1},
                        {1, 100000, 3}, {5, 2000, 1025}};
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    const char* name = op == ReduceOp::Sum ? "sum" : op == ReduceOp::Max ? "max" : "min";
    for (const Case& k : cases) {
      double n = static_cast<double>(k.n);
      // Sums in float32 carry an error that grows with n; max and min only round their input.
      Tol f32 = op == ReduceOp::Sum ? Tol{1e-4, 2e-6 * n} : Tol{1e-7, 0};
      Tol f64 = op == ReduceOp::Sum ? Tol{1e-10, 1e-12 * n} : kExact;
      t.push_back({"reduce",
                   std::string(name) + " " + dims_str({k.outer, k.n, k.inner}),
                   {Input::uniform({k.outer * k.n * k.inner}, 90)},
                   [op, k](const Ctx& c, const In& in) {
                     Tensor out = Tensor::empty({k.outer * k.inner}, c.dtype, c.device);
                     c.kernels().reduce(op, in[0].view(), k.outer, k.n, k.inner, out.view());
                     return Out{out};
                   },
                   f32,
                   f64,
                   false,
                   {DType::F32, DType::F64},
                   [op, k](const std::vector<std::vector<double>>& v) {
                     std::vector<double> y(k.outer * k.inner);
                     for (int64_t r = 0; r < k.outer; ++r)
                       for (int64_t i = 0; i < k.inner; ++i) {
                         double acc = v[0][r * k.n * k.inner + i];
                         for (int64_t j = 1; j < k.n; ++j) {
                           const double x = v[0][(r * k.n + j) * k.inner + i];
                           acc = op == ReduceOp::Sum   ? acc + x
                                 : op == ReduceOp::Max ? std::max(acc, x)
                                                       : std::min(acc, x);
                         }
                         y[r * k.inner + i] = acc;
                       }
                     return y;
                   }});
    }
  }
  // Σ x² into a float64 (a gradient norm's) and into the input's dtype; one chunk, and long rows
  // split over threads.
  for (int64_t n : {1, 17, 1000, 100003, 300000}) {
    for (bool wide : {true, false}) {
      const double dn = static_cast<double>(n);
      t.push_back({"sum_squares",
                   "sum of squares n=" + std::to_string(n) + (wide ? " into float64" : ""),
                   {Input::uniform({n}, 91)},
                   [wide](const Ctx& c, const In& in) {
                     Tensor out = Tensor::empty({}, wide ? DType::F64 : c.dtype, c.device);
                     c.kernels().sum_squares(in[0].view(), out.view());
                     return Out{out};
                   },
                   Tol{wide ? 1e-6 : 1e-5, 1e-7 * dn},
                   Tol{1e-11, 1e-13 * dn},
                   false,
                   {DType::F32, DType::F64},
                   [](const std::vector<std::vector<double>>& v) {
                     double total = 0;
                     for (double x : v[0]) total += x * x;
                     return std::vector<double>{total};
                   }});
    }
  }
  auto axes = [](const Ctx&, const In& in) {
    Tensor xt = transpose(in[0], 0, 2);
    Tensor a = sum(xt, {1}), b = mean(in[0], {0, 2}, true), c = max(xt, {0, 2});
    Tensor total = add(add(sum(mul(a, a)), sum(b)), add(sum(mul(c, c)), sum(in[0])));
    return Out{total, a, b, c};
  };
  t.push_back({"reduce",
               "sum mean max over axes through autograd [6, 17, 40]",
               {Input::leaf({6, 17, 40}, 100)},
               axes,
               kF32Loose,
               kF64Loose});
  t.push_back({"reduce",
               "sum mean max over axes through autograd [2, 3, 4]",
               {Input::leaf({2, 3, 4}, 101)},
               axes,
               kF32Loose,
               kF64Loose,
               true});

  struct Scan {
    Shape shape;
    int64_t axis;
  };
  // Warp scans (inner 1, or few columns) and a thread per column (many columns, short n).
  const Scan scans[] = {{{1}, 0},         {{17}, 0},         {{3, 1000}, 1},      {{5, 3001}, 1},
                        {{2, 17, 40}, 1}, {{2, 100, 40}, 1}, {{70, 100, 128}, 1}, {{1000, 3}, 0}};
  for (const Scan& s : scans) {
    t.push_back(
        {"logcumsumexp",
         "forward and backward " + shape_str(s.shape),
         {Input::leaf(s.shape, 110, -5, 5)},
         [axis = s.axis](const Ctx&, const In& in) { return Out{logcumsumexp(in[0], axis)}; },
         Tol{1e-4, 1e-4},
         Tol{1e-9, 1e-9},
         numel_of(s.shape) <= 40});
  }
  t.push_back({"logcumsumexp_backward",
               "along a middle axis [2, 5, 3]",
               {Input::leaf({2, 5, 3}, 112, -5, 5)},
               [](const Ctx&, const In& in) { return Out{logcumsumexp(in[0], 1)}; },
               Tol{1e-4, 1e-4},
               Tol{1e-9, 1e-9},
               true});
}

void add_gemm_cases(std::vector<OpCase>& t) {
  struct Size {
    int64_t m, n, k;
  };
  for (Size s : {Size{1, 1, 1}, Size{17, 5, 13}, Size{64, 1000, 17}, Size{300, 17, 1000}}) {
    for (int flags = 0; flags < 4; ++flags) {
      for (int64_t batch : {1, 3}) {
        for (bool broadcast_a : {false, true}) {
          if (broadcast_a && batch == 1) continue;
          bool ta = flags & 1, tb = flags & 2;
          int64_t items_a = broadcast_a ? 1 : batch;
          double kk = static_cast<double>(s.k);
          t.push_back(
              {"gemm",
               "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                   " k=" + std::to_string(s.k) + (ta ? " A^T" : "") + (tb ? " B^T" : "") +
                   " batch=" + std::to_string(batch) + (broadcast_a ? " A broadcast" : "") +
                   " beta=0.25",
               {Input::uniform({items_a * s.m * s.k}, 120),
                Input::uniform({batch * s.k * s.n}, 121), Input::uniform({batch * s.m * s.n}, 122)},
               [=](const Ctx& c, const In& in) {
                 Tensor C = in[2].clone();
                 GemmArgs g;
                 g.dtype = c.dtype;
                 g.trans_a = ta, g.trans_b = tb;
                 g.m = s.m, g.n = s.n, g.k = s.k;
                 g.a = in[0].raw_data(), g.lda = ta ? s.m : s.k;
                 g.stride_a = broadcast_a ? 0 : s.m * s.k;
                 g.b = in[1].raw_data(), g.ldb = tb ? s.k : s.n, g.stride_b = s.k * s.n;
                 g.c = C.raw_data(), g.ldc = s.n, g.stride_c = s.m * s.n;
                 g.batch = batch;
                 g.alpha = 0.5, g.beta = 0.25;
                 c.kernels().gemm(g);
                 return Out{C};
               },
               Tol{1e-4, 1e-6 * kk},
               Tol{1e-10, 1e-13 * kk}});
        }
      }
    }
  }
  // Items on a two-level grid [outer, inner] summed over the outer level into one C per inner
  // index (outer_stride_c = 0, gemm_sums_outer): C = alpha Σ_o A B + beta C, beta applied once.
  // A as is or transposed. One inner index takes the CPU's split of the outer items into
  // chunks; five, its split by inner index.
  for (Size s : {Size{7, 5, 3}, Size{49, 49, 32}, Size{300, 17, 70}})
    for (bool ta : {false, true})
      for (int64_t inner : {1, 5}) {
        const int64_t outer = 6;
        const double kk = static_cast<double>(s.k * outer);
        t.push_back({"gemm",
                     "summed over the outer level: m=" + std::to_string(s.m) + " n=" +
                         std::to_string(s.n) + " k=" + std::to_string(s.k) + (ta ? " A^T" : "") +
                         " outer=6 inner=" + std::to_string(inner) + " beta=0.25",
                     {Input::uniform({outer * inner * s.m * s.k}, 123),
                      Input::uniform({outer * inner * s.k * s.n}, 124),
                      Input::uniform({inner * s.m * s.n}, 125)},
                     [=](const Ctx& c, const In& in) {
                       Tensor C = in[2].clone();
                       GemmArgs g;
                       g.dtype = c.dtype;
                       g.trans_a = ta;
                       g.m = s.m, g.n = s.n, g.k = s.k;
                       g.a = in[0].raw_data(), g.lda = ta ? s.m : s.k;
                       g.stride_a = s.m * s.k, g.outer_stride_a = inner * s.m * s.k;
                       g.b = in[1].raw_data(), g.ldb = s.n;
                       g.stride_b = s.k * s.n, g.outer_stride_b = inner * s.k * s.n;
                       g.c = C.raw_data(), g.ldc = s.n, g.stride_c = s.m * s.n,
                       g.outer_stride_c = 0;
                       g.batch = outer * inner, g.inner = inner;
                       g.alpha = 0.5, g.beta = 0.25;
                       c.kernels().gemm(g);
                       return Out{C};
                     },
                     Tol{1e-4, 1e-6 * kk},
                     Tol{1e-10, 1e-13 * kk},
                     false,
                     {DType::F32, DType::F64},
                     [=](const std::vector<std::vector<double>>& v) {
                       std::vector<double> y(inner * s.m * s.n);
                       for (int64_t i = 0; i < inner; ++i)
                         for (int64_t r = 0; r < s.m; ++r)
                           for (int64_t j = 0; j < s.n; ++j) {
                             double acc = 0;
                             for (int64_t o = 0; o < outer; ++o) {
                               const double* a = v[0].data() + (o * inner + i) * s.m * s.k;
                               const double* b = v[1].data() + (o * inner + i) * s.k * s.n;
                               for (int64_t p = 0; p < s.k; ++p)
                                 acc += (ta ? a[p * s.m + r] : a[r * s.k + p]) * b[p * s.n + j];
                             }
                             const int64_t at = (i * s.m + r) * s.n + j;
                             y[at] = 0.5 * acc + 0.25 * v[2][at];
                           }
                       return y;
                     }});
      }
  auto products = [](const Ctx&, const In& in) {
    Tensor y = matmul(in[0], transpose(in[1], 1, 2));
    Tensor z = linear(y, in[2], in[3]);
    return Out{matmul(transpose(z, 2, 3), z), y, z};
  };
  t.push_back({"gemm",
               "matmul and linear through autograd [2, 1, 17, 9] [3, 13, 9]",
               {Input::leaf({2, 1, 17, 9}, 130), Input::leaf({3, 13, 9}, 131),
                Input::leaf({5, 13}, 132), Input::leaf({5}, 133)},
               products,
               Tol{1e-4, 1e-4},
               Tol{1e-10, 1e-11}});
  // Heads split out of [B, N, H·D] projections: no single batch stride, so gemm reads them on
  // a two-level grid (GemmArgs::inner), without a copy.
  t.push_back(
      {"gemm",
       "head-split views [2, 3, 5, 4] of [2, 5, 3·4] through matmul (two-level grid)",
       {Input::leaf({2, 5, 12}, 134), Input::leaf({2, 5, 12}, 135), Input::leaf({2, 5, 12}, 136)},
       [](const Ctx&, const In& in) {
         auto split = [](const Tensor& x) { return transpose(reshape(x, {2, 5, 3, 4}), 1, 2); };
         Tensor scores = matmul(split(in[0]), transpose(split(in[1]), -1, -2));
         return Out{scores, matmul(scores, split(in[2]))};
       },
       Tol{1e-4, 1e-4},
       Tol{1e-10, 1e-11},
       true});
  t.push_back({"gemm",
               "matmul and linear through autograd [2, 1, 3, 2] [2, 4, 2]",
               {Input::leaf({2, 1, 3, 2}, 134), Input::leaf({2, 4, 2}, 135),
                Input::leaf({3, 4}, 136), Input::leaf({3}, 137)},
               products,
               Tol{1e-4, 1e-4},
               Tol{1e-10, 1e-11},
               true});
}

// A product with its row pass fused in (gemm_epilogue): each epilogue on shapes that take the
// CPU's tall kernel in float32 (m ≥ 256; n past a 64-column panel, with a remainder; m not a
// multiple of its 6-row tiles) and shapes that take OpenBLAS and a separate pass, B stored as is
// or transposed. Output 0 is checked against the formula in plain C++.
void add_gemm_epilogue_cases(std::vector<OpCase>& t) {
  struct Size {
    int64_t m, n, k;
  };
  // BiasGeluSlope twice: its slope (C) and its GELU (aux) each checked against the formula.
  // 300 x 144 (rows of whole registers, a part-filled last panel) takes the CPU's tall kernel
  // with the slope streamed from a buffer of its own.
  struct Kind {
    GemmEpilogue e;
    const char* name;
    bool gelu_first;  // output 0 is aux, GELU's value
  };
  const Kind kinds[] = {{GemmEpilogue::Bias, "bias", false},
                        {GemmEpilogue::BiasGelu, "bias+gelu", true},
                        {GemmEpilogue::BiasGeluSlope, "bias+gelu+slope (slope)", false},
                        {GemmEpilogue::BiasGeluSlope, "bias+gelu+slope (gelu)", true},
                        {GemmEpilogue::Times, "times", false}};
  for (const Kind kind : kinds)
    for (Size s : {Size{17, 5, 13}, Size{259, 70, 33}, Size{300, 17, 1}, Size{1000, 130, 128},
                   Size{300, 144, 33}})
      for (bool tb : {false, true}) {
        const GemmEpilogue e = kind.e;
        const bool gelu_first = kind.gelu_first;
        t.push_back(
            {"gemm_epilogue",
             std::string(kind.name) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                 " k=" + std::to_string(s.k) + (tb ? " B^T" : ""),
             {Input::uniform({s.m, s.k}, 150), Input::uniform({s.k * s.n}, 151),
              Input::uniform({s.n}, 152), Input::uniform({s.m, s.n}, 153, -3, 3)},
             [=](const Ctx& c, const In& in) {
               Tensor C = Tensor::full({s.m, s.n}, NAN, c.dtype, c.device);  // beta 0: not read
               Tensor aux = e == GemmEpilogue::Times
                                ? in[3]
                                : Tensor::full({s.m, s.n}, NAN, c.dtype, c.device);
               GemmArgs g;
               g.dtype = c.dtype;
               g.trans_b = tb;
               g.m = s.m, g.n = s.n, g.k = s.k;
               g.a = in[0].raw_data(), g.lda = s.k;
               g.b = in[1].raw_data(), g.ldb = tb ? s.k : s.n;
               g.c = C.raw_data(), g.ldc = s.n;
               View bias = in[2].view();
               if (e == GemmEpilogue::Times) bias.data = nullptr;  // unused
               c.kernels().gemm_epilogue(g, e, bias, aux.view());
               if (e == GemmEpilogue::Bias || e == GemmEpilogue::Times) return Out{C};
               return gelu_first ? Out{aux, C} : Out{C, aux};
             },
             Tol{1e-4, 1e-5 * static_cast<double>(s.k)},
             Tol{1e-10, 1e-13 * static_cast<double>(s.k)},
             false,
             {DType::F32, DType::F64},
             [=](const std::vector<std::vector<double>>& v) {
               std::vector<double> y(s.m * s.n);
               for (int64_t r = 0; r < s.m; ++r)
                 for (int64_t j = 0; j < s.n; ++j) {
                   double acc = 0;
                   for (int64_t p = 0; p < s.k; ++p)
                     acc += v[0][r * s.k + p] * (tb ? v[1][j * s.k + p] : v[1][p * s.n + j]);
                   const double pre = acc + v[2][j];
                   y[r * s.n + j] = e == GemmEpilogue::Bias    ? pre
                                    : e == GemmEpilogue::Times ? acc * v[3][r * s.n + j]
                                    : gelu_first               ? gelu_exact(pre)
                                                               : gelu_exact_grad(pre);
                 }
               return y;
             }});
      }
  // RowSums: C as gemm makes it and the sums of op(A)'s rows (a weight's and its bias's gradients
  // from one read of dY). A stored transposed on the CPU's long kernel (k ≥ 256 and ≥ C's sides;
  // split along k on 2 threads), on OpenBLAS with rows or columns split and a separate sum, and
  // as is on the tall kernel. Output 0, the sums, against the formula.
  struct Sums {
    int64_t m, n, k;
    bool ta;
  };
  for (Sums s : {Sums{40, 48, 700, true}, Sums{127, 65, 300, true}, Sums{70, 30, 20, true},
                 Sums{300, 200, 100, true}, Sums{90, 400, 150, true}, Sums{259, 70, 33, false}}) {
    t.push_back({"gemm_epilogue",
                 "row sums of A m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                     " k=" + std::to_string(s.k) + (s.ta ? " A^T" : ""),
                 {Input::uniform({s.m * s.k}, 154), Input::uniform({s.k, s.n}, 155)},
                 [=](const Ctx& c, const In& in) {
                   Tensor C = Tensor::full({s.m, s.n}, NAN, c.dtype, c.device);  // beta 0: not read
                   Tensor sums = Tensor::full({s.m}, NAN, c.dtype, c.device);
                   GemmArgs g;
                   g.dtype = c.dtype;
                   g.trans_a = s.ta;
                   g.m = s.m, g.n = s.n, g.k = s.k;
                   g.a = in[0].raw_data(), g.lda = s.ta ? s.m : s.k;
                   g.b = in[1].raw_data(), g.ldb = s.n;
                   g.c = C.raw_data(), g.ldc = s.n;
                   View unused;  // RowSums takes no bias
                   unused.dtype = c.dtype;
                   c.kernels().gemm_epilogue(g, GemmEpilogue::RowSums, unused, sums.view());
                   return Out{sums, C};
                 },
                 Tol{1e-4, 1e-5 * static_cast<double>(s.k)},
                 Tol{1e-10, 1e-13 * static_cast<double>(s.k)},
                 false,
                 {DType::F32, DType::F64},
                 [=](const std::vector<std::vector<double>>& v) {
                   std::vector<double> sums(s.m, 0.0);
                   for (int64_t r = 0; r < s.m; ++r)
                     for (int64_t p = 0; p < s.k; ++p)
                       sums[r] += v[0][s.ta ? p * s.m + r : r * s.k + p];
                   return sums;
                 }});
  }

  // The layers that call it, through autograd: gradients by finite differences on small shapes
  // (float64 takes the separate pass), and the float32 tall kernel's forward and gradients
  // against the reference in float64. The input is a transposed view (the token-mixing MLPs' case).
  struct Dims {
    int64_t rows, in, hidden, out;
    bool grad;
  };
  for (const char* layer : {"feed_forward", "linear", "linear_gelu"})
    for (Dims d : {Dims{5, 3, 7, 4, true}, Dims{300, 40, 70, 33, false}}) {
      const std::string name = layer;
      t.push_back({"gemm_epilogue",
                   name + " through autograd rows=" + std::to_string(d.rows) + " " +
                       dims_str({d.in, d.hidden, d.out}),
                   {Input::leaf({d.in, d.rows}, 160), Input::leaf({d.hidden, d.in}, 161),
                    Input::leaf({d.hidden}, 162), Input::leaf({d.out, d.hidden}, 163),
                    Input::leaf({d.out}, 164)},
                   [name](const Ctx&, const In& in) {
                     Tensor x = transpose(in[0], 0, 1);
                     if (name == "linear") return Out{linear(x, in[1], in[2])};
                     if (name == "linear_gelu") return Out{linear_gelu(x, in[1], in[2])};
                     return Out{feed_forward(x, in[1], in[2], in[3], in[4])};
                   },
                   Tol{2e-4, 2e-4},
                   Tol{1e-10, 1e-11},
                   d.grad});
    }
}

void add_row_cases(std::vector<OpCase>& t) {
  // Column counts reach every register-cache size of the CUDA row kernels (common.cuh's
  // launch_cached_rows): a warp per row with 4, 16 and 32 elements a lane, a block per row with
  // 16 a thread, and rows too wide for registers (9000).
  for (int64_t rows : {1, 17, 300}) {
    for (int64_t cols : {1, 17, 300, 1000, 1025, 5000, 9000}) {
      if (rows == 300 && cols >= 5000) continue;
      for (bool log : {false, true}) {
        t.push_back({log ? "softmax_backward" : "softmax",
                     std::string(log ? "log_softmax" : "softmax") + " " + dims_str({rows, cols}),
                     {Input::leaf({rows, cols}, 140, -8, 8)},
                     [log](const Ctx&, const In& in) {
                       return Out{log ? log_softmax(in[0]) : softmax(in[0])};
                     },
                     kF32Loose,
                     kF64Loose,
                     rows * cols <= 20});
      }
    }
  }
  t.push_back({"softmax",
               "softmax along axis 0 [40, 3, 7]",
               {Input::leaf({40, 3, 7}, 142)},
               [](const Ctx&, const In& in) { return Out{softmax(in[0], 0)}; },
               kF32Loose,
               kF64Loose});

  // [4500, 40]: more rows than the CUDA backward's warps (a few blocks per multiprocessor), so
  // warps take several rows and add their parameter gradients across them.
  for (int64_t rows : {1, 17, 300, 4500}) {
    for (int64_t cols : {1, 17, 40, 300, 1000, 3000, 9000}) {
      if ((rows == 4500) != (cols == 40) || (rows == 300 && cols == 9000)) continue;
      for (int affine = 0; affine < 3; ++affine) {  // gamma and beta / gamma only / none
        std::vector<Input> inputs{Input::leaf({rows, cols}, 150, -2.5, 3.5)};
        if (affine < 2) inputs.push_back(Input::leaf({cols}, 151, 0.5, 1.5));
        if (affine < 1) inputs.push_back(Input::leaf({cols}, 152));
        const char* what[] = {" gamma and beta", " gamma", " no affine"};
        t.push_back({affine == 0 ? "layer_norm" : "layer_norm_backward",
                     "layer_norm " + dims_str({rows, cols}) + what[affine], inputs,
                     [affine](const Ctx&, const In& in) {
                       Tensor g = affine < 2 ? in[1] : Tensor();
                       Tensor b = affine < 1 ? in[2] : Tensor();
                       return Out{layer_norm(in[0], g, b, 1e-5)};
                     },
                     Tol{1e-3, 1e-4}, Tol{1e-9, 1e-10}, rows * cols <= 20 && cols > 1});
      }
    }
  }

  // The kernel adding its dx to a gradient already there (a pre-norm block's residual stream):
  // the CUDA backward's warp-per-row kernel (up to 512 columns) and its row kernel (more).
  for (int64_t rows : {17, 300, 4500}) {
    for (int64_t cols : {40, 300, 1000}) {
      if ((rows == 4500) != (cols == 40)) continue;
      t.push_back({"layer_norm_backward",
                   "layer_norm_backward adding to dx " + dims_str({rows, cols}),
                   {Input::uniform({rows, cols}, 156, -2.5, 3.5), Input::uniform({cols}, 157),
                    Input::uniform({rows, cols}, 158), Input::uniform({rows, cols}, 159)},
                   [rows, cols](const Ctx& c, const In& in) {
                     Tensor y = Tensor::empty({rows, cols}, c.dtype, c.device);
                     Tensor mean = Tensor::empty({rows}, c.dtype, c.device);
                     Tensor rstd = Tensor::empty({rows}, c.dtype, c.device);
                     Tensor dx = in[3].clone(), dg = Tensor::empty({cols}, c.dtype, c.device);
                     c.kernels().layer_norm(in[0].view(), in[1].view(), View{}, y.view(),
                                            mean.view(), rstd.view(), rows, cols, 1e-5);
                     c.kernels().layer_norm_backward(in[2].view(), in[0].view(), mean.view(),
                                                     rstd.view(), in[1].view(), dx.view(),
                                                     dg.view(), View{}, rows, cols, true);
                     return Out{dx, dg};
                   },
                   Tol{1e-3, 1e-4},
                   Tol{1e-9, 1e-10}});
    }
  }

  // No rows: gamma's and beta's gradients are sums of nothing, 0 (not left as they were).
  t.push_back(
      {"layer_norm_backward",
       "layer_norm [0, 17] gamma and beta (no rows)",
       {Input::leaf({0, 17}, 153), Input::leaf({17}, 154, 0.5, 1.5), Input::leaf({17}, 155)},
       [](const Ctx&, const In& in) { return Out{layer_norm(in[0], in[1], in[2], 1e-5)}; },
       Tol{1e-3, 1e-4},
       Tol{1e-9, 1e-10}});

  for (int64_t rows : {1, 17, 300}) {
    for (int64_t cols : {1, 17, 300, 1000, 5000, 9000}) {
      if (rows == 300 && cols >= 5000) continue;
      for (double smoothing : {0.0, 0.1}) {
        for (bool all_ignored : {false, true}) {
          t.push_back({smoothing == 0 ? "cross_entropy" : "cross_entropy_backward",
                       "cross_entropy " + dims_str({rows, cols}) + " smoothing " +
                           std::to_string(smoothing).substr(0, 3) +
                           (all_ignored ? " all ignored" : ""),
                       {Input::leaf({rows, cols}, 161, -4, 4),
                        Input::indices({rows}, 160, cols, all_ignored ? 1 : 5)},
                       [smoothing](const Ctx&, const In& in) {
                         return Out{mul(cross_entropy(in[0], in[1], -100, smoothing), 2.0)};
                       },
                       kF32Loose,
                       kF64Loose,
                       rows * cols <= 20 && !all_ignored});
        }
      }
    }
  }
}

void add_index_and_random_cases(std::vector<OpCase>& t) {
  // Same additions in the same order as the CPU: bit-identical in float64. Few distinct ids make
  // long runs of one id (the GPU's segments).
  for (int64_t count : {1, 17, 1000, 20000}) {
    for (int64_t ids : {50, 4}) {
      t.push_back({"scatter_add_rows",
                   "embedding count=" + std::to_string(count) + " ids < " + std::to_string(ids),
                   {Input::leaf({50, 17}, 171), Input::indices({count}, 170, ids)},
                   [](const Ctx&, const In& in) { return Out{embedding(in[0], in[1])}; },
                   // float32 sums of up to count / ids rows carry their rounding
                   Tol{2e-4, 2e-8 * static_cast<double>(count)},
                   kExact,
                   count == 1 && ids == 50});
    }
  }
  // The models' padding placement (nn/token_rows.h): packed rows to their padded places, zero
  // rows where take is -1, and the gradient gathered back.
  t.push_back({"gather_rows",
               "take_rows: packed rows to their padded places",
               {Input::leaf({5, 2, 3}, 174), Input::given({8}, {1, -1, 2, 3, -1, 4, -1, 0}),
                Input::given({5}, {7, 0, 2, 3, 5})},
               [](const Ctx&, const In& in) {
                 return Out{take_rows(in[0], cast(in[1], DType::I32), cast(in[2], DType::I32))};
               },
               kF32,  // the float32 copy of the float64 reference's inputs
               kExact});
  // Valid indices pass on every backend (the failures: test_bad_input.cpp on the CPU,
  // test_cuda_backend.cpp on a GPU, where they surface at the next wait).
  t.push_back({"check_indices",
               "in range or the ignore value",
               {Input::given({6}, {8, 0, -100, 5, 0, 3})},
               [](const Ctx& c, const In& in) {
                 Tensor idx = cast(in[0], DType::I32);
                 c.kernels().check_indices(idx.view(), 9, -100, "check: index", "is bad");
                 return Out{cast(idx, c.dtype)};  // unchanged: a check writes nothing
               },
               kExact,
               kExact});
  t.push_back({"gather_rows",
               "int32 rows",
               {Input::ints({9, 4}, 173), Input::given({4}, {8, 0, 0, 5})},
               [](const Ctx& c, const In& in) {
                 Tensor table = cast(in[0], DType::I32);
                 Tensor idx = cast(in[1], DType::I32);
                 Tensor out = Tensor::empty({4, 4}, DType::I32, c.device);
                 c.kernels().gather_rows(table.view(), idx.view(), out.view(), 4, 4);
                 return Out{out};
               },
               kExact,
               kExact});
  for (int64_t n : {1, 17, 100003}) {
    for (double p : {0.1, 0.5, 0.9}) {
      t.push_back(
          {"dropout_mask",
           "mask and dropout n=" + std::to_string(n) + " p=" + std::to_string(p).substr(0, 3),
           {Input::leaf({n}, 180)},
           [n, p](const Ctx& c, const In& in) {
             Tensor mask = Tensor::empty({n}, c.dtype, c.device);
             c.kernels().dropout_mask(mask.view(), p, 1234567);
             return Out{dropout(in[0], p, true, 99), mask};
           },
           kF32,
           kExact});
    }
  }
}

void add_fft_cases(std::vector<OpCase>& t) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const Case cases[] = {{{1, 2}, 0},        {{17, 2}, 0},       {{1000, 2}, 0},
                        {{3, 17, 5, 2}, 1}, {{7, 16, 2, 2}, 1}, {{6, 5, 4, 2}, 0},
                        {{4, 3, 12, 2}, 2}, {{3, 2}, 0}};
  for (const Case& c : cases) {
    for (bool inverse : {false, true}) {
      double scale = std::sqrt(static_cast<double>(c.shape[c.axis])) * 4;
      t.push_back({"fft",
                   "fft " + shape_str(c.shape) + " axis " + std::to_string(c.axis) +
                       (inverse ? " inverse" : ""),
                   {Input::leaf(c.shape, 190)},
                   [axis = c.axis, inverse](const Ctx&, const In& in) {
                     return Out{fft(in[0], axis, inverse)};
                   },
                   Tol{0, 2e-5 * scale},
                   Tol{0, 1e-11 * scale},
                   numel_of(c.shape) <= 6});
    }
  }
  // A contiguous view that starts between two complex numbers (staged to an aligned copy).
  t.push_back({"fft",
               "fft of an unaligned view [1000, 2]",
               {Input::uniform({2001}, 192)},
               [](const Ctx&, const In& in) {
                 return Out{fft(reshape(narrow(in[0], 0, 1, 2000), {1000, 2}), 0)};
               },
               Tol{0, 2e-5 * 200},
               Tol{0, 1e-11 * 200}});

  struct Case2 {
    Shape shape;
    std::vector<double> lengths;  // empty: none
  };
  const Case2 cases2[] = {
      {{2, 5, 6}, {}},          {{2, 5, 6}, {3, 5}}, {{3, 17, 9}, {}},
      {{3, 17, 9}, {0, 17, 1}}, {{4, 8, 1}, {}},     {{4, 8, 1}, {8, 2, 5, 0}},
      {{2, 1, 7}, {}},          {{2, 1, 7}, {1, 0}}, {{2, 64, 32}, {64, 64}},
      {{1, 1000, 2}, {}},       {{2, 3, 2}, {2, 3}},
  };
  for (const Case2& c : cases2) {
    double scale = 4 * std::sqrt(static_cast<double>(numel_of(c.shape)));
    std::vector<Input> inputs{Input::leaf(c.shape, 200)};
    bool lengths = !c.lengths.empty();
    if (lengths)
      inputs.push_back(Input::given({static_cast<int64_t>(c.lengths.size())}, c.lengths));
    t.push_back({"fft2_real", "fft2_real " + shape_str(c.shape) + (lengths ? " with lengths" : ""),
                 inputs,
                 [lengths](const Ctx&, const In& in) {
                   return Out{fft2_real(in[0], lengths ? cast(in[1], DType::I32) : Tensor())};
                 },
                 Tol{0, 1e-5 * scale}, Tol{0, 1e-11 * scale}, numel_of(c.shape) <= 12});
  }
}

// The long circular convolution: x [B, N, d] with a kernel [L ≥ 2N − 1, d], forward and (through
// the leaves' gradients) backward; L = 2N − 1 wraps the latest lag onto the earliest row.
void add_circular_conv_cases(std::vector<OpCase>& t) {
  struct Case {
    int64_t batch, n, d, length;
  };
  const Case cases[] = {{2, 1, 3, 1},  {2, 3, 3, 5},    {3, 5, 4, 9},
                        {2, 7, 3, 16}, {4, 49, 5, 100}, {2, 17, 8, 45}};
  for (const Case& c : cases) {
    const Shape xs{c.batch, c.n, c.d}, ks{c.length, c.d};
    const double scale = 4 * std::sqrt(static_cast<double>(c.batch * c.n));
    const bool small = c.batch * c.n * c.d <= 30;
    for (const char* kernel : {"circular_conv", "circular_conv_backward"})
      t.push_back({kernel,
                   std::string(kernel) + " x " + shape_str(xs) + " kernel " + shape_str(ks),
                   {Input::leaf(xs, 210), Input::leaf(ks, 211)},
                   [](const Ctx&, const In& in) { return Out{circular_conv(in[0], in[1])}; },
                   Tol{0, 1e-5 * scale},
                   Tol{0, 1e-11 * scale},
                   small});
  }
}

void add_optimizer_cases(std::vector<OpCase>& t) {
  for (int64_t n : {1, 17, 1000}) {
    for (int variant = 0; variant < 3; ++variant) {
      const char* adam_what[] = {"adam", "adam weight decay", "adamw"};
      t.push_back({"adam_update",
                   std::string(adam_what[variant]) + " 3 steps n=" + std::to_string(n),
                   {Input::uniform({n}, 210), Input::uniform({n}, 212), Input::uniform({n}, 213),
                    Input::uniform({n}, 214)},
                   [variant](const Ctx& c, const In& in) {
                     Tensor p = in[0].clone();
                     Tensor m = Tensor::zeros(p.shape(), c.dtype, c.device);
                     Tensor v = Tensor::zeros(p.shape(), c.dtype, c.device);
                     for (int step = 1; step <= 3; ++step) {
                       AdamArgs a{};
                       a.lr = 1e-2, a.beta1 = 0.9, a.beta2 = 0.999, a.eps = 1e-8;
                       a.weight_decay = variant == 0 ? 0.0 : 0.05;
                       a.decoupled = variant == 2;
                       a.bias_correction1 = 1 - std::pow(a.beta1, step);
                       a.bias_correction2 = 1 - std::pow(a.beta2, step);
                       c.kernels().adam_update(p.view(), in[step].view(), m.view(), v.view(), a);
                     }
                     return Out{p, m, v};
                   },
                   Tol{1e-5, 1e-6},
                   Tol{1e-12, 1e-14}});
      const char* sgd_what[] = {"sgd", "sgd momentum", "sgd nesterov"};
      t.push_back({"sgd_update",
                   std::string(sgd_what[variant]) + " 3 steps n=" + std::to_string(n),
                   {Input::uniform({n}, 220), Input::uniform({n}, 222), Input::uniform({n}, 223),
                    Input::uniform({n}, 224)},
                   [variant](const Ctx& c, const In& in) {
                     Tensor p = in[0].clone();
                     Tensor buf = Tensor::zeros(p.shape(), c.dtype, c.device);
                     for (int step = 1; step <= 3; ++step) {
                       SgdArgs a{};
                       a.lr = 0.1;
                       a.momentum = variant == 0 ? 0.0 : 0.9;
                       a.dampening = 0.1;
                       a.weight_decay = 1e-3;
                       a.nesterov = variant == 2;
                       a.first_step = step == 1;
                       c.kernels().sgd_update(p.view(), in[step].view(), buf.view(), a);
                     }
                     return Out{p, buf};
                   },
                   Tol{1e-6, 1e-7},
                   Tol{1e-12, 1e-14}});
    }
  }
}

// The flat updates (every parameter in one call): weight decay on [0, decayed) only.
void add_flat_optimizer_cases(std::vector<OpCase>& t) {
  for (int64_t n : {1, 17, 1000}) {
    for (int64_t part = 0; part <= 2; ++part) {
      const int64_t decayed = part * n / 2;                     // none, half, all decayed
      if (part > 0 && decayed == (part - 1) * n / 2) continue;  // n = 1: half is none
      const std::string what =
          " 3 steps n=" + std::to_string(n) + " decayed=" + std::to_string(decayed);
      t.push_back({"adam_update_flat",
                   "adamw" + what,
                   {Input::uniform({n}, 230), Input::uniform({n}, 232), Input::uniform({n}, 233),
                    Input::uniform({n}, 234)},
                   [decayed](const Ctx& c, const In& in) {
                     Tensor p = in[0].clone();
                     Tensor m = Tensor::zeros(p.shape(), c.dtype, c.device);
                     Tensor v = Tensor::zeros(p.shape(), c.dtype, c.device);
                     for (int step = 1; step <= 3; ++step) {
                       AdamArgs a{};
                       a.lr = 1e-2, a.beta1 = 0.9, a.beta2 = 0.999, a.eps = 1e-8;
                       a.weight_decay = 0.5, a.decoupled = true;
                       a.bias_correction1 = 1 - std::pow(a.beta1, step);
                       a.bias_correction2 = 1 - std::pow(a.beta2, step);
                       c.kernels().adam_update_flat(p.view(), in[step].view(), m.view(), v.view(),
                                                    decayed, a);
                     }
                     return Out{p, m, v};
                   },
                   Tol{1e-5, 1e-6},
                   Tol{1e-12, 1e-14}});
      t.push_back({"sgd_update_flat",
                   "sgd momentum" + what,
                   {Input::uniform({n}, 240), Input::uniform({n}, 242), Input::uniform({n}, 243),
                    Input::uniform({n}, 244)},
                   [decayed](const Ctx& c, const In& in) {
                     Tensor p = in[0].clone();
                     Tensor buf = Tensor::zeros(p.shape(), c.dtype, c.device);
                     for (int step = 1; step <= 3; ++step) {
                       SgdArgs a{};
                       a.lr = 0.1, a.momentum = 0.9, a.weight_decay = 0.5;
                       a.first_step = step == 1;
                       c.kernels().sgd_update_flat(p.view(), in[step].view(), buf.view(), decayed,
                                                   a);
                     }
                     return Out{p, buf};
                   },
                   Tol{1e-6, 1e-7},
                   Tol{1e-12, 1e-14}});
    }
  }
}

// ---- fused kernels: bias (+ GELU) in one pass, a per-channel scale and shift, residual +
// dropout + layer norm in one row kernel, dropout with its mask drawn in the kernel ----
void add_fused_cases(std::vector<OpCase>& t) {
  for (int64_t rows : {1, 17, 300}) {
    for (int64_t cols : {1, 17, 1000, 3000}) {
      if (rows == 300 && cols == 3000) continue;
      std::vector<Input> inputs{Input::leaf({rows, cols}, 230, -3, 3), Input::leaf({cols}, 231)};
      bool small = rows * cols <= 20;
      t.push_back({"bias_act",
                   "bias_add " + dims_str({rows, cols}),
                   inputs,
                   // the bias's gradient sums up to 300 rows in float32
                   [](const Ctx&, const In& in) { return Out{bias_add(in[0], in[1])}; },
                   kF32Loose,
                   Tol{1e-12, 1e-13},
                   small,
                   {DType::F32, DType::F64},
                   [cols](const std::vector<std::vector<double>>& v) {
                     std::vector<double> y(v[0].size());
                     for (size_t i = 0; i < y.size(); ++i) y[i] = v[0][i] + v[1][i % cols];
                     return y;
                   }});
      t.push_back({"bias_gelu_backward",
                   "bias_gelu " + dims_str({rows, cols}),
                   inputs,
                   [](const Ctx&, const In& in) { return Out{bias_gelu(in[0], in[1])}; },
                   kF32Loose,
                   kF64Loose,
                   small,
                   {DType::F32, DType::F64},
                   [cols](const std::vector<std::vector<double>>& v) {
                     std::vector<double> y(v[0].size());
                     for (size_t i = 0; i < y.size(); ++i) {
                       double x = v[0][i] + v[1][i % cols];
                       y[i] = gelu_exact(x);
                     }
                     return y;
                   }});
      for (bool shifted : {true, false}) {
        std::vector<Input> affine{Input::leaf({rows, cols}, 241, -3, 3),
                                  Input::leaf({cols}, 242, -2, 2), Input::leaf({cols}, 243)};
        if (!shifted) affine.pop_back();
        // Both kernels run in every row (forward, then backward for the gradients).
        t.push_back({shifted ? "scale_shift" : "scale_shift_backward",
                     std::string(shifted ? "scale_shift " : "scale_shift, no shift, ") +
                         dims_str({rows, cols}),
                     affine,
                     [shifted](const Ctx&, const In& in) {
                       return Out{scale_shift(in[0], in[1], shifted ? in[2] : Tensor())};
                     },
                     kF32Loose,
                     Tol{1e-12, 1e-13},
                     small,
                     {DType::F32, DType::F64},
                     [cols, shifted](const std::vector<std::vector<double>>& v) {
                       std::vector<double> y(v[0].size());
                       for (size_t i = 0; i < y.size(); ++i)
                         y[i] = v[0][i] * v[1][i % cols] + (shifted ? v[2][i % cols] : 0.0);
                       return y;
                     }});
      }
      for (double p : {0.0, 0.3}) {
        std::vector<Input> res{Input::leaf({rows, cols}, 232, -2, 2),
                               Input::leaf({rows, cols}, 233, -2, 2),
                               Input::leaf({cols}, 234, 0.5, 1.5), Input::leaf({cols}, 235)};
        t.push_back({"add_dropout_layer_norm",
                     "add_dropout_layer_norm " + dims_str({rows, cols}) +
                         " p=" + std::to_string(p).substr(0, 3),
                     res,
                     [p](const Ctx&, const In& in) {
                       ResidualNorm r = add_dropout_layer_norm(in[0], in[1], p, 606, in[2], in[3]);
                       return Out{r.normed, r.sum};
                     },
                     Tol{1e-3, 1e-4}, Tol{1e-9, 1e-10}, small && cols > 1});
      }
    }
  }
  t.push_back({"bias_act",
               "linear_gelu [2, 5, 7] x [9, 7]^T",
               {Input::leaf({2, 5, 7}, 236), Input::leaf({9, 7}, 237), Input::leaf({9}, 238)},
               [](const Ctx&, const In& in) { return Out{linear_gelu(in[0], in[1], in[2])}; },
               kF32Loose,
               kF64Loose,
               /*grad=*/true});
  t.push_back({"add_dropout_layer_norm",
               "add_dropout without norm [4, 33] p=0.5",
               {Input::leaf({4, 33}, 239), Input::leaf({4, 33}, 240)},
               [](const Ctx&, const In& in) { return Out{add_dropout(in[0], in[1], 0.5, 17)}; },
               kF32,
               kExact});
  for (int64_t n : {1, 17, 100003}) {
    for (double p : {0.1, 0.9}) {
      t.push_back({"dropout_apply",
                   "dropout_apply in place and dropout n=" + std::to_string(n) +
                       " p=" + std::to_string(p).substr(0, 3),
                   {Input::leaf({n}, 241)},
                   [p](const Ctx& c, const In& in) {
                     Tensor y = in[0].detach().clone();
                     c.kernels().dropout_apply(y.view(), y.view(), p, 31337);
                     return Out{dropout(in[0], p, true, 31337), y};
                   },
                   kF32,
                   kExact});
    }
  }
}

// ---- the attention core (fused_attention) ----
struct AttnDims {
  int64_t b, h, n, m, d, e;
};

// out_row[:e] += Σ_j softmax(w over the keys ok[j])_j · v[j·e ..]: one query row of the cores'
// references (nothing when no key is allowed: the row stays 0).
void add_softmax_weighted_row(std::vector<double> w, const std::vector<bool>& ok, const double* v,
                              int64_t e, double* out_row) {
  const size_t m = w.size();
  double hi = -INFINITY, total = 0;
  for (size_t j = 0; j < m; ++j)
    if (ok[j]) hi = std::max(hi, w[j]);
  if (hi == -INFINITY) return;
  for (size_t j = 0; j < m; ++j) w[j] = ok[j] ? std::exp(w[j] - hi) : 0.0;
  for (double x : w) total += x;
  for (size_t j = 0; j < m; ++j)
    for (int64_t c = 0; c < e; ++c) out_row[c] += w[j] / total * v[static_cast<int64_t>(j) * e + c];
}

// softmax of scale·q kᵀ over the allowed keys, times v, in plain C++ (a row with no allowed key
// is 0). q, k, v row-major [B, H, ·, ·]; allowed(b, i, j) says whether query i sees key j;
// bias(b, h, i, j) (if given) is added to the scaled score.
using ScoreBias = std::function<double(int64_t, int64_t, int64_t, int64_t)>;
std::vector<double> attention_reference(
    const std::vector<std::vector<double>>& in, AttnDims s,
    const std::function<bool(int64_t, int64_t, int64_t)>& allowed,
    const ScoreBias& bias = nullptr) {
  double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  std::vector<double> out(static_cast<size_t>(s.b * s.h * s.n * s.e), 0.0);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.n; ++i) {
        int64_t item = b * s.h + h;
        std::vector<double> w(static_cast<size_t>(s.m), 0.0);
        std::vector<bool> ok(static_cast<size_t>(s.m));
        for (int64_t j = 0; j < s.m; ++j) {
          ok[j] = allowed(b, i, j);
          for (int64_t c = 0; c < s.d; ++c)
            w[j] += in[0][(item * s.n + i) * s.d + c] * in[1][(item * s.m + j) * s.d + c];
          w[j] *= scale;
          if (bias) w[j] += bias(b, h, i, j);
        }
        add_softmax_weighted_row(w, ok, &in[2][item * s.m * s.e], s.e,
                                 &out[(item * s.n + i) * s.e]);
      }
  return out;
}

void add_attention_cases(std::vector<OpCase>& t) {
  auto inputs = [](AttnDims s, uint64_t seed) {
    return std::vector<Input>{Input::leaf({s.b, s.h, s.n, s.d}, seed, -2, 2),
                              Input::leaf({s.b, s.h, s.m, s.d}, seed + 1, -2, 2),
                              Input::leaf({s.b, s.h, s.m, s.e}, seed + 2)};
  };
  auto name = [](const char* what, AttnDims s) {
    return std::string(what) + " q " + dims_str({s.b, s.h, s.n, s.d}) + " k " +
           dims_str({s.b, s.h, s.m, s.d}) + " v " + dims_str({s.b, s.h, s.m, s.e});
  };
  auto scale = [](AttnDims s) { return 1.0 / std::sqrt(static_cast<double>(s.d)); };

  // A row against the formula, masked by what make_mask builds (from the context and inputs).
  using MakeMask = std::function<Tensor(const Ctx&, const In&)>;
  using Allowed = std::function<bool(int64_t, int64_t, int64_t)>;
  auto against_formula = [&t, name, scale](const char* kernel, const char* what, AttnDims s,
                                           std::vector<Input> in, MakeMask make_mask,
                                           Allowed allowed) {
    t.push_back({kernel,
                 name(what, s),
                 std::move(in),
                 [s, scale, make_mask](const Ctx& c, const In& x) {
                   return Out{fused_attention(x[0], x[1], x[2], make_mask(c, x), scale(s))};
                 },
                 kF32Loose,
                 kF64Loose,
                 /*grad=*/true,
                 {DType::F32, DType::F64},
                 [s, allowed](const std::vector<std::vector<double>>& v) {
                   return attention_reference(v, s, allowed);
                 }});
  };

  // No mask, self- and cross-attention (N != M, E != D).
  for (AttnDims s :
       {AttnDims{1, 1, 1, 1, 1, 1}, AttnDims{2, 3, 4, 4, 3, 3}, AttnDims{2, 2, 3, 5, 4, 2}}) {
    against_formula(
        "attention", "unmasked", s, inputs(s, 190), [](const Ctx&, const In&) { return Tensor(); },
        [](int64_t, int64_t, int64_t) { return true; });
  }

  // Padded keys [B, 1, 1, M] (item 1 has 2 of 5 keys) and causal [N, M] masks, and both.
  {
    AttnDims s{2, 2, 5, 5, 3, 3};
    std::vector<double> keys = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    auto key_ok = [keys](int64_t b, int64_t, int64_t j) { return keys[b * 5 + j] != 0; };
    std::vector<Input> in = inputs(s, 193);
    in.push_back(Input::given({2, 1, 1, 5}, keys));
    against_formula(
        "attention_backward", "padded keys", s, in, [](const Ctx&, const In& x) { return x[3]; },
        key_ok);
    against_formula(
        "attention_backward", "causal and padded keys", s, in,
        [s](const Ctx& c, const In& x) {
          return mul(x[3], tril_mask(s.n, s.m, 0, c.dtype, c.device));
        },
        [key_ok](int64_t b, int64_t i, int64_t j) { return key_ok(b, i, j) && j <= i; });
  }

  // Cross-attention with padded query rows whose keys are all masked ([B, 1, N, M]: they give 0
  // and pass no gradient), a decoding-style causal offset, and a query of one row.
  {
    AttnDims s{2, 2, 4, 6, 3, 5};
    std::vector<double> mask(2 * 4 * 6, 1.0);
    for (int64_t j = 0; j < 6; ++j) mask[(0 * 4 + 3) * 6 + j] = 0;  // item 0, row 3: nothing
    for (int64_t j = 0; j < 6; ++j) mask[(1 * 4 + 0) * 6 + j] = 0;  // item 1, row 0: nothing
    mask[(1 * 4 + 2) * 6 + 5] = 0;
    std::vector<Input> in = inputs(s, 196);
    in.push_back(Input::given({2, 1, 4, 6}, mask));
    against_formula(
        "attention", "rows with no key", s, in, [](const Ctx&, const In& x) { return x[3]; },
        [mask](int64_t b, int64_t i, int64_t j) { return mask[(b * 4 + i) * 6 + j] != 0; });
    AttnDims one{2, 3, 1, 6, 4, 4};
    t.push_back({"attention", name("one query, causal offset", one), inputs(one, 199),
                 [one, scale](const Ctx& c, const In& x) {
                   Tensor mask = tril_mask(1, 6, 3, c.dtype, c.device);  // sees keys 0..3
                   return Out{fused_attention(x[0], x[1], x[2], mask, scale(one))};
                 },
                 kF32Loose, kF64Loose, true});
  }

  // Heads split out of [B, N, H·D] projections (strided rows, no copy), as the mixers call it.
  {
    t.push_back({"attention_backward",
                 "split heads of [2, 5, 3·4] and [2, 7, 3·4]",
                 {Input::leaf({2, 5, 12}, 202, -2, 2), Input::leaf({2, 7, 12}, 203, -2, 2),
                  Input::leaf({2, 7, 12}, 204)},
                 [](const Ctx&, const In& x) {
                   auto split = [](const Tensor& t) {
                     return transpose(reshape(t, {t.size(0), t.size(1), 3, 4}), 1, 2);
                   };
                   return Out{
                       fused_attention(split(x[0]), split(x[1]), split(x[2]), Tensor(), 0.5)};
                 },
                 kF32Loose,
                 kF64Loose,
                 true});
  }

  // Self-attention from one packed projection [B, N, 3·H·D] (fused_self_attention: Q, K, V read
  // in place, one gradient buffer), causal with padded keys.
  {
    std::vector<double> keys = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    t.push_back({"attention_backward",
                 "self-attention from packed qkv [2, 5, 3·2·4], causal and padded keys",
                 {Input::leaf({2, 5, 24}, 208, -2, 2), Input::given({2, 1, 1, 5}, keys)},
                 [](const Ctx& c, const In& x) {
                   Tensor mask = mul(x[1], tril_mask(5, 5, 0, c.dtype, c.device));
                   return Out{fused_self_attention(x[0], 2, mask, 0.5)};
                 },
                 kF32Loose,
                 kF64Loose,
                 true});
  }

  // The same on sequences packed back to back without padding (fused_self_attention_groups, the
  // models' rows): groups of 2 sequences of 3 rows, 1 of 1 and 1 of 4, causal and not.
  for (bool causal : {false, true}) {
    t.push_back(
        {"attention_backward",
         std::string("self-attention on grouped rows [11, 3·2·4], ") +
             (causal ? "causal" : "not causal"),
         {Input::leaf({11, 24}, 209, -2, 2)},
         [causal](const Ctx&, const In& x) {
           return Out{fused_self_attention_groups(x[0], 2, {{2, 3}, {1, 1}, {1, 4}}, causal, 0.5)};
         },
         kF32Loose,
         kF64Loose,
         true});
  }

  // Cross-attention on grouped rows (fused_attention_groups): 2 sequences of 3 queries and 4
  // keys, 1 of 2 queries and no key (its output 0), 1 of no query and 2 keys (no gradient).
  t.push_back({"attention_backward",
               "cross-attention on grouped rows, q [8, 2·4], k [10, 2·4], v [10, 2·3]",
               {Input::leaf({8, 8}, 210, -2, 2), Input::leaf({10, 8}, 211, -2, 2),
                Input::leaf({10, 6}, 212, -2, 2)},
               [](const Ctx&, const In& x) {
                 return Out{fused_attention_groups(x[0], x[1], x[2], 2,
                                                   {{2, 3, 4}, {1, 2, 0}, {1, 0, 2}}, 0.5)};
               },
               kF32Loose,
               kF64Loose,
               true});

  // Rows of scores in registers (attention_short_keys.cpp): 16 keys fill one AVX-512 register
  // (two of AVX2), 17 and 40 start a second and a third (AVX2: start a third, fill five), 64
  // fill four (eight); 65 keys take the tiles. 13 query rows make uneven groups for every
  // register count (7 and 6, or 5, 4 and 4, ...); widths 20 and 36 end in partial registers.
  // Causal over padded keys, with a query row that sees no key (item 0's keys up to query 0's
  // last padded).
  for (AttnDims s : {AttnDims{2, 2, 13, 16, 20, 36}, AttnDims{2, 2, 13, 17, 20, 36},
                     AttnDims{1, 2, 13, 40, 20, 36}, AttnDims{1, 2, 13, 64, 20, 36},
                     AttnDims{1, 2, 13, 65, 20, 36}}) {
    const int64_t offset = s.m - s.n;  // query i sees keys j ≤ i + offset
    std::vector<double> keys(static_cast<size_t>(s.b * s.m), 1.0);
    for (int64_t j = 0; j <= offset; ++j) keys[static_cast<size_t>(j)] = 0;  // item 0, query 0
    std::vector<Input> in = inputs(s, 210);
    in.push_back(Input::given({s.b, 1, 1, s.m}, keys));
    against_formula(
        "attention_backward", "rows of scores in registers, or tiles", s, in,
        [s, offset](const Ctx& c, const In& x) {
          return mul(x[3], tril_mask(s.n, s.m, offset, c.dtype, c.device));
        },
        [keys, s, offset](int64_t b, int64_t i, int64_t j) {
          return keys[static_cast<size_t>(b * s.m + j)] != 0 && j <= i + offset;
        });
  }

  // Sizes past one tile of scores (16,384 per tile: 300 keys make tiles of 54 query rows), with
  // a causal mask; and the classifier's 49 tokens (on a GPU: the row kernels, then one block a
  // head).
  for (AttnDims s : {AttnDims{1, 2, 130, 300, 16, 8}, AttnDims{3, 4, 49, 49, 32, 32}}) {
    t.push_back({"attention_backward", name("causal, long", s), inputs(s, 206),
                 [s, scale](const Ctx& c, const In& x) {
                   Tensor mask = tril_mask(s.n, s.m, s.m - s.n, c.dtype, c.device);
                   return Out{fused_attention(x[0], x[1], x[2], mask, scale(s))};
                 },
                 Tol{1e-3, 1e-4}, kF64Loose});
  }
}

// ---- attention with an additive bias on the scores (fused_attention's bias) ----
// The bias of attention_reference from in[3], row-major with dims `dims` (each 1 or the full
// size: broadcast there).
ScoreBias bias_from(const std::vector<std::vector<double>>& in, std::array<int64_t, 4> dims) {
  return [&in, dims](int64_t b, int64_t h, int64_t i, int64_t j) {
    b = dims[0] == 1 ? 0 : b, h = dims[1] == 1 ? 0 : h, i = dims[2] == 1 ? 0 : i,
    j = dims[3] == 1 ? 0 : j;
    return in[3][static_cast<size_t>(((b * dims[1] + h) * dims[2] + i) * dims[3] + j)];
  };
}

void add_biased_attention_cases(std::vector<OpCase>& t) {
  // q, k, v, then the bias (over ±3, so it moves the weights as much as the scores do), then the
  // mask's data (if any).
  auto inputs = [](AttnDims s, std::array<int64_t, 4> bias, uint64_t seed) {
    return std::vector<Input>{Input::leaf({s.b, s.h, s.n, s.d}, seed, -2, 2),
                              Input::leaf({s.b, s.h, s.m, s.d}, seed + 1, -2, 2),
                              Input::leaf({s.b, s.h, s.m, s.e}, seed + 2),
                              Input::leaf({bias[0], bias[1], bias[2], bias[3]}, seed + 3, -3, 3)};
  };
  auto name = [](const std::string& what, AttnDims s, std::array<int64_t, 4> bias) {
    return what + " q " + dims_str({s.b, s.h, s.n, s.d}) + " k " + dims_str({s.b, s.h, s.m, s.d}) +
           " bias " + dims_str({bias[0], bias[1], bias[2], bias[3]});
  };
  using Allowed = std::function<bool(int64_t, int64_t, int64_t)>;
  // Causal over padded keys (the last key of item 1 and, for m > n, the causal offset), the
  // bias per example and head, shared by the batch, shared by batch and heads, or one per key
  // (broadcast along the queries: the op copies it to rows).
  for (AttnDims s : {AttnDims{2, 2, 5, 5, 3, 3}, AttnDims{2, 2, 13, 17, 20, 36},
                     AttnDims{2, 2, 13, 49, 8, 8}, AttnDims{1, 2, 13, 65, 8, 12}}) {
    const int64_t offset = s.m - s.n;
    std::vector<double> keys(static_cast<size_t>(s.b * s.m), 1.0);
    if (s.b > 1) keys[static_cast<size_t>(2 * s.m - 1)] = 0;
    const Allowed allowed = [keys, s, offset](int64_t b, int64_t i, int64_t j) {
      return keys[static_cast<size_t>(b * s.m + j)] != 0 && j <= i + offset;
    };
    const std::array<int64_t, 4> biases[] = {
        {s.b, s.h, s.n, s.m}, {1, s.h, s.n, s.m}, {1, 1, s.n, s.m}, {s.b, 1, 1, s.m}};
    for (const std::array<int64_t, 4>& bias : biases) {
      if (s.b == 1 && &bias == &biases[1]) continue;  // the same as the first
      std::vector<Input> in = inputs(s, bias, 260);
      in.push_back(Input::given({s.b, 1, 1, s.m}, keys));
      t.push_back({"attention_backward",
                   name("bias, causal and padded keys,", s, bias),
                   std::move(in),
                   [s, offset](const Ctx& c, const In& x) {
                     Tensor mask = mul(x[4], tril_mask(s.n, s.m, offset, c.dtype, c.device));
                     return Out{fused_attention(x[0], x[1], x[2], mask,
                                                1.0 / std::sqrt(static_cast<double>(s.d)), x[3])};
                   },
                   kF32Loose,
                   kF64Loose,
                   /*grad=*/true,
                   {DType::F32, DType::F64},
                   [s, bias, allowed](const std::vector<std::vector<double>>& v) {
                     return attention_reference(v, s, allowed, bias_from(v, bias));
                   }});
    }
  }
  // Self-attention from one packed projection with a bias per head shared by the batch (the
  // synthesizers' mixtures: a random synthesizer's logits beside the dot-product ones), padded.
  {
    std::vector<double> keys = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    t.push_back({"attention_backward",
                 "self-attention from packed qkv [2, 5, 3·2·4] with a bias [1, 2, 5, 5], padded",
                 {Input::leaf({2, 5, 24}, 270, -2, 2), Input::leaf({1, 2, 5, 5}, 271, -3, 3),
                  Input::given({2, 1, 1, 5}, keys)},
                 [](const Ctx&, const In& x) {
                   return Out{fused_self_attention(x[0], 2, x[2], 0.5, x[1])};
                 },
                 kF32Loose,
                 kF64Loose,
                 true});
  }
}

// ---- the synthesizers' core (fused_synthesized_attention) ----
// softmax of the given logits over the allowed keys, times v, in plain C++ (a row with no allowed
// key is 0). in[0]: logits [Bl, H, N, M] row-major (Bl = 1: the same for every example), in[1]:
// v [B, H, M, E]; allowed(b, i, j) says whether query i sees key j.
std::vector<double> synthesized_reference(
    const std::vector<std::vector<double>>& in, AttnDims s, bool shared,
    const std::function<bool(int64_t, int64_t, int64_t)>& allowed) {
  std::vector<double> out(static_cast<size_t>(s.b * s.h * s.n * s.e), 0.0);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.n; ++i) {
        const int64_t item = b * s.h + h, logit_item = (shared ? 0 : b) * s.h + h;
        const double* row = &in[0][(logit_item * s.n + i) * s.m];
        std::vector<bool> ok(static_cast<size_t>(s.m));
        for (int64_t j = 0; j < s.m; ++j) ok[j] = allowed(b, i, j);
        add_softmax_weighted_row(std::vector<double>(row, row + s.m), ok, &in[1][item * s.m * s.e],
                                 s.e, &out[(item * s.n + i) * s.e]);
      }
  return out;
}

void add_synthesized_attention_cases(std::vector<OpCase>& t) {
  // (d is unused: the logits are given.) Logits over ±4, so rows are far from uniform.
  auto inputs = [](AttnDims s, bool shared, uint64_t seed) {
    return std::vector<Input>{Input::leaf({shared ? 1 : s.b, s.h, s.n, s.m}, seed, -4, 4),
                              Input::leaf({s.b, s.h, s.m, s.e}, seed + 1)};
  };
  auto name = [](const char* what, AttnDims s, bool shared) {
    return std::string(what) + " logits " + dims_str({shared ? 1 : s.b, s.h, s.n, s.m}) + " v " +
           dims_str({s.b, s.h, s.m, s.e});
  };
  using MakeMask = std::function<Tensor(const Ctx&, const In&)>;
  using Allowed = std::function<bool(int64_t, int64_t, int64_t)>;
  auto against_formula = [&t, name](const char* kernel, const char* what, AttnDims s, bool shared,
                                    std::vector<Input> in, MakeMask make_mask, Allowed allowed,
                                    bool grad = true) {
    t.push_back({kernel,
                 name(what, s, shared),
                 std::move(in),
                 [make_mask](const Ctx& c, const In& x) {
                   return Out{fused_synthesized_attention(x[0], x[1], make_mask(c, x))};
                 },
                 grad ? kF32Loose : Tol{1e-4, 1e-5},
                 kF64Loose,
                 grad,
                 {DType::F32, DType::F64},
                 [s, shared, allowed](const std::vector<std::vector<double>>& v) {
                   return synthesized_reference(v, s, shared, allowed);
                 }});
  };
  auto no_mask = [](const Ctx&, const In&) { return Tensor(); };
  auto all = [](int64_t, int64_t, int64_t) { return true; };

  // Unmasked, per-example and shared logits (the shared gradient sums over the batch); N != M.
  for (bool shared : {false, true})
    for (AttnDims s : {AttnDims{1, 1, 1, 1, 0, 1}, AttnDims{3, 2, 4, 5, 0, 3}})
      against_formula("synthesized_attention", shared ? "shared, unmasked" : "unmasked", s, shared,
                      inputs(s, shared, 230), no_mask, all);

  // Shared logits under padded keys [B, 1, 1, M] (item 1 has 2 of 5 keys), causal and padded.
  for (bool shared : {false, true}) {
    AttnDims s{2, 2, 5, 5, 0, 3};
    std::vector<double> keys = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    auto key_ok = [keys](int64_t b, int64_t, int64_t j) { return keys[b * 5 + j] != 0; };
    std::vector<Input> in = inputs(s, shared, 233);
    in.push_back(Input::given({2, 1, 1, 5}, keys));
    against_formula(
        "synthesized_attention_backward", "causal and padded keys", s, shared, in,
        [s](const Ctx& c, const In& x) {
          return mul(x[2], tril_mask(s.n, s.m, 0, c.dtype, c.device));
        },
        [key_ok](int64_t b, int64_t i, int64_t j) { return key_ok(b, i, j) && j <= i; });
  }

  // Rows with no allowed key ([B, 1, N, M]: they give 0 and pass no gradient).
  {
    AttnDims s{2, 2, 4, 6, 0, 5};
    std::vector<double> mask(2 * 4 * 6, 1.0);
    for (int64_t j = 0; j < 6; ++j) mask[(0 * 4 + 3) * 6 + j] = 0;  // item 0, row 3: nothing
    for (int64_t j = 0; j < 6; ++j) mask[(1 * 4 + 0) * 6 + j] = 0;  // item 1, row 0: nothing
    mask[(1 * 4 + 2) * 6 + 5] = 0;
    std::vector<Input> in = inputs(s, false, 236);
    in.push_back(Input::given({2, 1, 4, 6}, mask));
    against_formula(
        "synthesized_attention_backward", "rows with no key", s, false, in,
        [](const Ctx&, const In& x) { return x[2]; },
        [mask](int64_t b, int64_t i, int64_t j) { return mask[(b * 4 + i) * 6 + j] != 0; });
  }

  // As the synthesizers call it: v's heads split out of [B, M, H·E] and the logits a heads view
  // of [B, N, H, M] (the dense synthesizer's layout, whose gradient comes back in it), in place.
  t.push_back({"synthesized_attention_backward",
               "logits a heads view of [2, 4, 3, 6], v split heads of [2, 6, 3·5]",
               {Input::leaf({2, 4, 3, 6}, 240, -4, 4), Input::leaf({2, 6, 15}, 241)},
               [](const Ctx&, const In& x) {
                 Tensor v = transpose(reshape(x[1], {2, 6, 3, 5}), 1, 2);
                 return Out{fused_synthesized_attention(transpose(x[0], 1, 2), v, Tensor())};
               },
               kF32Loose,
               kF64Loose,
               true});

  // Rows in registers (attention_short_keys.cpp): 16 keys fill one AVX-512 register (two of
  // AVX2), 17 and 40 start a second and a third (AVX2: start a third, fill five), 49 (the
  // classifier) and 64 take four (seven and eight); 65 keys take the cblas path.
  // 13 query rows; width 36 ends in a partial register. Causal over padded keys, with a query row
  // that sees no key, and shared logits for 49 (the gradient summed over 2 examples).
  for (AttnDims s : {AttnDims{2, 2, 13, 16, 0, 36}, AttnDims{2, 2, 13, 17, 0, 36},
                     AttnDims{1, 2, 13, 40, 0, 36}, AttnDims{2, 2, 13, 49, 0, 36},
                     AttnDims{1, 2, 13, 64, 0, 36}, AttnDims{1, 2, 13, 65, 0, 36}}) {
    const bool shared = s.m == 49;
    const int64_t offset = s.m - s.n;  // query i sees keys j ≤ i + offset
    std::vector<double> keys(static_cast<size_t>(s.b * s.m), 1.0);
    for (int64_t j = 0; j <= offset; ++j) keys[static_cast<size_t>(j)] = 0;  // item 0, query 0
    std::vector<Input> in = inputs(s, shared, 244);
    in.push_back(Input::given({s.b, 1, 1, s.m}, keys));
    against_formula(
        "synthesized_attention_backward", "rows in registers, or cblas", s, shared, in,
        [s, offset](const Ctx& c, const In& x) {
          return mul(x[2], tril_mask(s.n, s.m, offset, c.dtype, c.device));
        },
        [keys, s, offset](int64_t b, int64_t i, int64_t j) {
          return keys[static_cast<size_t>(b * s.m + j)] != 0 && j <= i + offset;
        },
        /*grad=*/false);
  }

  // A head too large for one GPU block's shared memory (backends/cuda/attention_block.cuh:
  // 96 KiB): 150 queries over 160 keys take the CUDA row kernels instead, causal.
  {
    AttnDims s{1, 2, 150, 160, 0, 8};
    const int64_t offset = s.m - s.n;
    against_formula(
        "synthesized_attention_backward", "past one GPU block, causal", s, false,
        inputs(s, false, 248),
        [s, offset](const Ctx& c, const In&) {
          return tril_mask(s.n, s.m, offset, c.dtype, c.device);
        },
        [offset](int64_t, int64_t i, int64_t j) { return j <= i + offset; },
        /*grad=*/false);
  }
}

// ---- glu (lightconv's and dynconv's input gate) ----
// a ⊙ σ(b) with x = a‖b, gates over ±8 (σ near 0 and 1); both kernels in every row.
void add_glu_cases(std::vector<OpCase>& t) {
  for (Shape shape : {Shape{3, 10}, Shape{2, 3, 34}, Shape{100, 256}}) {
    const bool small = shape.size() < 3 && shape[0] * shape[1] <= 30;
    for (const char* kernel : {"glu", "glu_backward"})
      t.push_back({kernel,
                   std::string("glu ") + shape_str(shape),
                   {Input::leaf(shape, 270, -8, 8)},
                   [](const Ctx&, const In& in) { return Out{glu(in[0])}; },
                   kF32Loose,
                   kF64Loose,
                   small || shape.size() == 3,
                   {DType::F32, DType::F64},
                   [shape](const std::vector<std::vector<double>>& v) {
                     const int64_t cols = shape.back() / 2;
                     const int64_t rows = static_cast<int64_t>(v[0].size()) / (2 * cols);
                     std::vector<double> y(static_cast<size_t>(rows * cols));
                     for (int64_t r = 0; r < rows; ++r)
                       for (int64_t c = 0; c < cols; ++c)
                         y[r * cols + c] = v[0][r * 2 * cols + c] /
                                           (1.0 + std::exp(-v[0][r * 2 * cols + cols + c]));
                     return y;
                   }});
  }
}

// ---- spatial_gate (gMLP's and aMLP's gate with G's per-token bias) ----
// z ⊙ (g + bias[t]) on [B, N, C] (C a whole number of vector registers and not), [N, C] and a
// wider [2, 3, 4, 40]; small cases run gradient mode for all three inputs.
void add_spatial_gate_cases(std::vector<OpCase>& t) {
  for (Shape shape : {Shape{2, 3, 5}, Shape{4, 19}, Shape{2, 3, 4, 40}, Shape{8, 49, 64}}) {
    const int64_t channels = shape.back(), tokens = shape[shape.size() - 2];
    const bool small = shape[0] * channels <= 80;
    for (const char* kernel : {"spatial_gate", "spatial_gate_backward"})
      t.push_back({kernel,
                   std::string("spatial_gate ") + shape_str(shape),
                   {Input::leaf(shape, 280), Input::leaf({tokens}, 281), Input::leaf(shape, 282)},
                   [](const Ctx&, const In& in) { return Out{spatial_gate(in[0], in[1], in[2])}; },
                   kF32Loose,
                   kF64Loose,
                   small,
                   {DType::F32, DType::F64},
                   [tokens, channels](const std::vector<std::vector<double>>& v) {
                     std::vector<double> y(v[0].size());
                     for (size_t i = 0; i < y.size(); ++i)
                       y[i] = v[2][i] * (v[0][i] + v[1][(i / channels) % tokens]);
                     return y;
                   }});
  }
}

// ---- token_softmax_normalize (External attention's memory weights) ----
// Logits [B, N, ..., S] (tokens on axis 1, slots last) and a slot bias [S] (which the softmax
// cancels; its gradient is checked too): the softmax down each slot's valid tokens, then every
// token's weights normalised over the slots (eps 1e-3). With a mask, example 0 has its last
// tokens invalid and, where there are three examples, example 2 has none valid (its weights are
// all 0); without one, every token counts. Small cases also run gradient mode (invalid tokens get
// dL = 0 exactly).
void add_token_softmax_normalize_cases(std::vector<OpCase>& t) {
  struct Case {
    Shape shape;
    bool masked;
  };
  for (Case c : {Case{{2, 4, 3, 5}, true}, Case{{3, 6, 4}, true}, Case{{2, 7, 5}, false},
                 Case{{4, 49, 4, 64}, true}, Case{{2, 9, 3, 13}, true}}) {
    const int64_t batch = c.shape[0], tokens = c.shape[1], slots = c.shape.back();
    std::vector<double> marks(static_cast<size_t>(batch * tokens), 1.0);
    for (int64_t n = tokens / 2 + 1; n < tokens; ++n) marks[n] = 0.0;  // example 0: a short one
    if (batch == 3)
      for (int64_t n = 0; n < tokens; ++n) marks[2 * tokens + n] = 0.0;  // example 2: empty
    std::vector<Input> inputs{Input::leaf(c.shape, 270, -3, 3), Input::leaf({slots}, 271)};
    if (c.masked) inputs.push_back(Input::given({batch, tokens}, marks));
    const int64_t count = numel_of(c.shape);
    const bool small = count / tokens <= 60;
    // over: the logits handed over as an rvalue nothing else holds (External attention's way),
    // so the weights are written over them, and dL over dW where the engine holds dW alone.
    for (bool over : {false, true})
      for (const char* kernel : {"token_softmax_normalize", "token_softmax_normalize_backward"})
        t.push_back(
            {kernel,
             std::string("token_softmax_normalize ") + shape_str(c.shape) +
                 (c.masked ? " masked" : "") + (over ? ", in place" : ""),
             inputs,
             [over](const Ctx&, const In& in) {
               const Tensor valid = in.size() > 2 ? in[2] : Tensor();
               if (over)  // mul by 1: exact, and a tensor of the op's own
                 return Out{token_softmax_normalize(mul(in[0], 1.0), in[1], valid, 1e-3)};
               return Out{token_softmax_normalize(in[0], in[1], valid, 1e-3)};
             },
             kF32Loose,
             kF64Loose,
             small,
             {DType::F32, DType::F64},
             [c, batch, tokens, slots, count](const std::vector<std::vector<double>>& v) {
               const int64_t cols = count / (batch * tokens);  // heads · slots
               std::vector<double> y(v[0].size());
               for (int64_t b = 0; b < batch; ++b) {
                 const double* l = v[0].data() + b * tokens * cols;
                 double* w = y.data() + b * tokens * cols;
                 const auto valid = [&](int64_t n) {  // the bias v[1] cancels in the softmax
                   return !c.masked || v[2][b * tokens + n] != 0;
                 };
                 for (int64_t col = 0; col < cols; ++col) {  // down each column
                   double hi = -1e300, total = 0;
                   for (int64_t n = 0; n < tokens; ++n)
                     if (valid(n)) hi = std::max(hi, l[n * cols + col]);
                   for (int64_t n = 0; n < tokens; ++n)
                     total += valid(n) ? std::exp(l[n * cols + col] - hi) : 0.0;
                   for (int64_t n = 0; n < tokens; ++n)
                     w[n * cols + col] = valid(n) ? std::exp(l[n * cols + col] - hi) / total : 0.0;
                 }
                 for (int64_t seg = 0; seg < tokens * cols; seg += slots) {  // over slots
                   double total = 1e-3;
                   for (int64_t s = 0; s < slots; ++s) total += w[seg + s];
                   for (int64_t s = 0; s < slots; ++s) w[seg + s] /= total;
                 }
               }
               return y;
             }});
  }
}

// ---- sum_normalize (External attention's double normalisation) ----
// x / (eps + Σ_axis x) on positive inputs (as External's softmax outputs are) along the first,
// a middle and the last axis; each row runs both kernels (the gradients by finite differences).
void add_sum_normalize_cases(std::vector<OpCase>& t) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  for (Case c :
       {Case{{2, 3, 5, 4}, -2}, Case{{4, 6}, 0}, Case{{3, 7}, -1}, Case{{16, 64, 49}, 1}}) {
    const bool small = c.shape[0] * c.shape[1] <= 24;
    for (const char* kernel : {"sum_normalize", "sum_normalize_backward"})
      t.push_back(
          {kernel,
           std::string("sum_normalize ") + shape_str(c.shape) + " axis " + std::to_string(c.axis),
           {Input::leaf(c.shape, 260, 0.05, 2)},
           [c](const Ctx&, const In& in) { return Out{sum_normalize(in[0], c.axis, 1e-3)}; },
           kF32Loose,
           kF64Loose,
           small,
           {DType::F32, DType::F64},
           [c](const std::vector<std::vector<double>>& v) {
             const int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
             int64_t outer = 1, inner = 1;
             for (int64_t i = 0; i < a; ++i) outer *= c.shape[i];
             for (size_t i = a + 1; i < c.shape.size(); ++i) inner *= c.shape[i];
             const int64_t length = c.shape[a];
             std::vector<double> y(v[0].size());
             for (int64_t o = 0; o < outer; ++o)
               for (int64_t i = 0; i < inner; ++i) {
                 double total = 1e-3;
                 for (int64_t l = 0; l < length; ++l) total += v[0][(o * length + l) * inner + i];
                 for (int64_t l = 0; l < length; ++l)
                   y[(o * length + l) * inner + i] = v[0][(o * length + l) * inner + i] / total;
               }
             return y;
           }});
  }
}

// ---- linear attention's core (fused_linear_attention) ----
// (q (kᵀ v)) / (q Σ_j k_j + eps) per (b, h), in plain C++: in[0] q [B, H, N, D], in[1] k
// [B, H, M, D], in[2] v [B, H, M, E], row-major. Features positive (φ = elu + 1 is).
std::vector<double> linear_attention_reference(const std::vector<std::vector<double>>& in,
                                               AttnDims s, double eps) {
  std::vector<double> out(static_cast<size_t>(s.b * s.h * s.n * s.e), 0.0);
  for (int64_t item = 0; item < s.b * s.h; ++item)
    for (int64_t i = 0; i < s.n; ++i) {
      double den = eps;
      std::vector<double> num(static_cast<size_t>(s.e), 0.0);
      for (int64_t j = 0; j < s.m; ++j) {
        double w = 0;  // q_i · k_j
        for (int64_t c = 0; c < s.d; ++c)
          w += in[0][(item * s.n + i) * s.d + c] * in[1][(item * s.m + j) * s.d + c];
        den += w;
        for (int64_t f = 0; f < s.e; ++f) num[f] += w * in[2][(item * s.m + j) * s.e + f];
      }
      for (int64_t f = 0; f < s.e; ++f) out[(item * s.n + i) * s.e + f] = num[f] / den;
    }
  return out;
}

void add_linear_attention_cases(std::vector<OpCase>& t) {
  const double eps = 1e-6;
  auto inputs = [](AttnDims s, uint64_t seed) {
    return std::vector<Input>{Input::leaf({s.b, s.h, s.n, s.d}, seed, 0.05, 2),
                              Input::leaf({s.b, s.h, s.m, s.d}, seed + 1, 0.05, 2),
                              Input::leaf({s.b, s.h, s.m, s.e}, seed + 2)};
  };
  // One element; N != M and D != E; widths past one register (20, 36) and rows in groups of 8.
  for (AttnDims s :
       {AttnDims{1, 1, 1, 1, 1, 1}, AttnDims{2, 3, 4, 6, 3, 5}, AttnDims{1, 2, 13, 11, 20, 36}}) {
    const bool small = s.b * s.h * (s.n + s.m) * (s.d + s.e) <= 2000;
    t.push_back({"linear_attention_backward",
                 std::string("linear attention q ") + dims_str({s.b, s.h, s.n, s.d}) + " k " +
                     dims_str({s.b, s.h, s.m, s.d}) + " v " + dims_str({s.b, s.h, s.m, s.e}),
                 inputs(s, 280),
                 [eps](const Ctx&, const In& x) {
                   return Out{fused_linear_attention(x[0], x[1], x[2], eps)};
                 },
                 kF32Loose,
                 kF64Loose,
                 small,
                 {DType::F32, DType::F64},
                 [s, eps](const std::vector<std::vector<double>>& v) {
                   return linear_attention_reference(v, s, eps);
                 }});
  }
  // As the mixer calls it: heads split out of [B, N, H·D] projections (strided rows, no copy).
  t.push_back({"linear_attention",
               "linear attention, split heads of [2, 5, 3·4] and [2, 7, 3·4]",
               {Input::leaf({2, 5, 12}, 284, 0.05, 2), Input::leaf({2, 7, 12}, 285, 0.05, 2),
                Input::leaf({2, 7, 12}, 286)},
               [eps](const Ctx&, const In& x) {
                 auto split = [](const Tensor& t) {
                   return transpose(reshape(t, {t.size(0), t.size(1), 3, 4}), 1, 2);
                 };
                 return Out{fused_linear_attention(split(x[0]), split(x[1]), split(x[2]), eps)};
               },
               kF32Loose,
               kF64Loose,
               true});
}

// ---- outer_product (the factorized dense synthesizer's logits) ----
// One row, p = 1 or q = 1, the synthesizer's [B, N, h, 7] x [B, N, h, 7], and sizes that split
// over threads; an empty a (p = 0), whose b still gets a gradient of zeros.
void add_outer_product_cases(std::vector<OpCase>& t) {
  struct Case {
    Shape a, b;
  };
  for (Case c :
       {Case{{3}, {4}}, Case{{2, 1}, {2, 5}}, Case{{3, 4}, {3, 1}},
        Case{{2, 3, 2, 7}, {2, 3, 2, 7}}, Case{{300, 9}, {300, 13}}, Case{{2, 0}, {2, 3}}}) {
    const bool small = c.a.back() * c.b.back() * c.a[0] <= 200;
    for (const char* kernel : {"outer_product", "outer_product_backward"})
      t.push_back({kernel,
                   std::string("outer_product a ") + shape_str(c.a) + " b " + shape_str(c.b),
                   {Input::leaf(c.a, 270, -2, 2), Input::leaf(c.b, 271, -2, 2)},
                   [](const Ctx&, const In& in) { return Out{outer_product(in[0], in[1])}; },
                   kF32,
                   Tol{1e-12, 1e-13},
                   small,
                   {DType::F32, DType::F64},
                   [c](const std::vector<std::vector<double>>& v) {
                     const int64_t p = c.a.back(), q = c.b.back();
                     const int64_t rows = p > 0 ? static_cast<int64_t>(v[0].size()) / p
                                                : static_cast<int64_t>(v[1].size()) / q;
                     std::vector<double> out(static_cast<size_t>(rows * p * q));
                     for (int64_t r = 0; r < rows; ++r)
                       for (int64_t u = 0; u < p; ++u)
                         for (int64_t w = 0; w < q; ++w)
                           out[(r * p + u) * q + w] = v[0][r * p + u] * v[1][r * q + w];
                     return out;
                   }});
  }
}

// ---- the depthwise token convolution (token_conv) ----
struct ConvDims {
  int64_t b, n, d, h, k, left;
  bool per_item, per_position;  // taps [B, ·] or [1, ·]; [·, N] or [·, 1]
};

// out[b, t, c] = Σ_m taps[b|0, t|0, h(c), m] · g[b, t + m − left, c] in plain C++.
std::vector<double> token_conv_reference(const std::vector<std::vector<double>>& in, ConvDims s) {
  std::vector<double> out(static_cast<size_t>(s.b * s.n * s.d), 0.0);
  int64_t tn = s.per_position ? s.n : 1;
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t t = 0; t < s.n; ++t)
      for (int64_t c = 0; c < s.d; ++c)
        for (int64_t m = 0; m < s.k; ++m) {
          int64_t src = t + m - s.left;
          if (src < 0 || src >= s.n) continue;
          int64_t slot = (s.per_item ? b : 0) * tn + (s.per_position ? t : 0);
          double w = in[1][(slot * s.h + c / (s.d / s.h)) * s.k + m];
          out[(b * s.n + t) * s.d + c] += w * in[0][(b * s.n + src) * s.d + c];
        }
  return out;
}

void add_token_conv_cases(std::vector<OpCase>& t) {
  auto add = [&t](const char* kernel, ConvDims s, bool grad, Tol f32) {
    Shape taps{s.per_item ? s.b : 1, s.per_position ? s.n : 1, s.h, s.k};
    std::string name = std::string("token_conv g ") + dims_str({s.b, s.n, s.d}) + " taps " +
                       dims_str({taps[0], taps[1], taps[2], taps[3]}) +
                       " left=" + std::to_string(s.left);
    t.push_back(
        {kernel,
         name,
         {Input::leaf({s.b, s.n, s.d}, 260, -2, 2), Input::leaf(taps, 261)},
         [s](const Ctx&, const In& x) { return Out{token_conv(x[0], x[1], s.left)}; },
         f32,
         kF64Loose,
         grad,
         {DType::F32, DType::F64},
         [s](const std::vector<std::vector<double>>& v) { return token_conv_reference(v, s); }});
  };
  // Small, every element perturbed in gradient mode: shared and per-position taps (and the
  // mixed shapes), causal (left = K − 1), centred (K / 2) and left = 0, a kernel wider than
  // the sequence, one head and one channel per head.
  for (bool per_item : {false, true})
    for (bool per_position : {false, true})
      for (int64_t left : {0, 1, 2}) {
        const char* kernel = left == 1 ? "token_conv" : "token_conv_backward";
        add(kernel, ConvDims{2, 5, 6, 2, 3, left, per_item, per_position}, true, kF32Loose);
      }
  add("token_conv_backward", ConvDims{2, 3, 4, 4, 5, 2, false, false}, true, kF32Loose);
  add("token_conv_backward", ConvDims{2, 3, 4, 1, 5, 4, true, true}, true, kF32Loose);
  add("token_conv", ConvDims{1, 1, 3, 3, 1, 0, false, false}, true, kF32Loose);
  // The mixers' sizes (d = 128, 4 heads, K = 7, 49 tokens): shared taps sum over every row.
  for (bool per : {false, true})
    for (int64_t left : {3, 6})
      add("token_conv_backward", ConvDims{3, 49, 128, 4, 7, left, per, per}, false,
          Tol{1e-3, 1e-4});
}

// ---- the selective scan of mamba (selective_scan; the plain loops of
// backends/reference/selective_scan.h as the expected values) ----
void add_selective_scan_cases(std::vector<OpCase>& t) {
  // u, Δ > 0, A < 0 (as mamba makes them: softplus and −exp), B, C, D.
  auto add = [&t](const char* kernel, reference::ScanDims s, bool grad, Tol f32) {
    const Shape rows{s.batch, s.tokens, s.channels}, states{s.batch, s.tokens, s.state};
    t.push_back({kernel,
                 std::string("selective_scan u ") + dims_str({s.batch, s.tokens, s.channels}) +
                     " state " + std::to_string(s.state),
                 {Input::leaf(rows, 300, -1, 1), Input::leaf(rows, 301, 0.05, 0.8),
                  Input::leaf({s.channels, s.state}, 302, -1.5, -0.1), Input::leaf(states, 303),
                  Input::leaf(states, 304), Input::leaf({s.channels}, 305)},
                 [](const Ctx&, const In& x) {
                   return Out{selective_scan(x[0], x[1], x[2], x[3], x[4], x[5])};
                 },
                 f32,
                 kF64Loose,
                 grad,
                 {DType::F32, DType::F64},
                 [s](const std::vector<std::vector<double>>& v) {
                   std::vector<double> y(static_cast<size_t>(s.batch * s.tokens * s.channels));
                   reference::selective_scan<double>(v[0].data(), v[1].data(), v[2].data(),
                                                     v[3].data(), v[4].data(), v[5].data(),
                                                     y.data(), s);
                   return y;
                 }});
  };
  // Small, every element perturbed in gradient mode: one token, one channel, one state; a
  // channel count past one task's group (33) and the mixers' sizes (E = 2d, n = 16).
  add("selective_scan_backward", {2, 5, 3, 4}, true, kF32Loose);
  add("selective_scan_backward", {1, 1, 1, 1}, true, kF32Loose);
  add("selective_scan", {2, 3, 33, 2}, true, kF32Loose);
  add("selective_scan_backward", {3, 49, 256, 16}, false, Tol{1e-3, 1e-4});
}

std::vector<OpCase> build_table() {
  std::vector<OpCase> t;
  add_memory_cases(t);
  add_elementwise_cases(t);
  add_reduction_cases(t);
  add_gemm_cases(t);
  add_gemm_epilogue_cases(t);
  add_row_cases(t);
  add_index_and_random_cases(t);
  add_fft_cases(t);
  add_circular_conv_cases(t);
  add_optimizer_cases(t);
  add_flat_optimizer_cases(t);
  add_attention_cases(t);
  add_biased_attention_cases(t);
  add_synthesized_attention_cases(t);
  add_fused_cases(t);
  add_token_conv_cases(t);
  add_sum_normalize_cases(t);
  add_token_softmax_normalize_cases(t);
  add_spatial_gate_cases(t);
  add_outer_product_cases(t);
  add_linear_attention_cases(t);
  add_glu_cases(t);
  add_selective_scan_cases(t);
  return t;
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> table = build_table();
  return table;
}

}  // namespace mixlab::test
