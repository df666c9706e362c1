// Elementwise kernels: a functor per op, one strided loop for all of them.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/fast_math.h"
#include "backends/cpu/strided.h"
#include "core/dtype_dispatch.h"

namespace mixlab {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

// One op as a compile-time constant, so each op's loop is its own vectorisable loop.
template <UnaryOp OP, typename T>
inline T apply_unary(T x, T alpha) {
  using cpu::erf_of;
  using cpu::exp_of;
  if constexpr (OP == UnaryOp::Neg)
    return -x;
  else if constexpr (OP == UnaryOp::Exp)
    return exp_of(x);
  else if constexpr (OP == UnaryOp::Log)
    return std::log(x);
  else if constexpr (OP == UnaryOp::Sqrt)
    return std::sqrt(x);
  else if constexpr (OP == UnaryOp::Abs)
    return x < T(0) ? -x : x;
  else if constexpr (OP == UnaryOp::Sign)
    return static_cast<T>((x > 0) - (x < 0));
  else if constexpr (OP == UnaryOp::Relu)
    return x > 0 ? x : T(0);
  else if constexpr (OP == UnaryOp::Step)
    return x > 0 ? T(1) : T(0);
  else if constexpr (OP == UnaryOp::Sigmoid)
    return T(1) / (T(1) + exp_of(-x));
  else if constexpr (OP == UnaryOp::Tanh)
    return std::tanh(x);
  else if constexpr (OP == UnaryOp::GeluErf)
    return T(0.5) * x * (T(1) + erf_of(x * T(kInvSqrt2)));
  else if constexpr (OP == UnaryOp::GeluTanh) {
    T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  } else if constexpr (OP == UnaryOp::GeluErfGrad) {  // Φ(x) + x φ(x)
    return T(0.5) * (T(1) + erf_of(x * T(kInvSqrt2))) +
           x * T(kInvSqrt2Pi) * exp_of(T(-0.5) * x * x);
  } else if constexpr (OP == UnaryOp::GeluTanhGrad) {
    T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    T t = std::tanh(inner);
    T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
  } else if constexpr (OP == UnaryOp::PowScalar)
    return std::pow(x, alpha);
  else if constexpr (OP == UnaryOp::AddScalar)
    return x + alpha;
  else
    return x * alpha;  // MulScalar
}

template <typename T>
T apply_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Div:
      return a / b;
    case BinaryOp::Maximum:
      return a >= b ? a : b;
    case BinaryOp::Minimum:
      return a <= b ? a : b;
    case BinaryOp::Equal:
      return a == b ? T(1) : T(0);
    case BinaryOp::Greater:
      return a > b ? T(1) : T(0);
  }
  return a;
}

// The switch sits outside the loop: each op gets its own vectorisable inner loop.
template <typename T, typename F>
void unary_loop(const T* x, T* y, int64_t n, const F& f) {
  parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const View& x, const View& y, double alpha) {
  dispatch_floating(x.dtype, "unary", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    T a = static_cast<T>(alpha);
    int64_t n = x.numel();
#define MIXLAB_UNARY_CASE(OP)                                                    \
  case UnaryOp::OP:                                                              \
    unary_loop(in, out, n, [a](T v) { return apply_unary<UnaryOp::OP>(v, a); }); \
    return;
    switch (op) {
      MIXLAB_UNARY_CASE(Neg)
      MIXLAB_UNARY_CASE(Exp)
      MIXLAB_UNARY_CASE(Log)
      MIXLAB_UNARY_CASE(Sqrt)
      MIXLAB_UNARY_CASE(Abs)
      MIXLAB_UNARY_CASE(Sign)
      MIXLAB_UNARY_CASE(Relu)
      MIXLAB_UNARY_CASE(Step)
      MIXLAB_UNARY_CASE(Sigmoid)
      MIXLAB_UNARY_CASE(Tanh)
      MIXLAB_UNARY_CASE(GeluErf)
      MIXLAB_UNARY_CASE(GeluTanh)
      MIXLAB_UNARY_CASE(GeluErfGrad)
      MIXLAB_UNARY_CASE(GeluTanhGrad)
      MIXLAB_UNARY_CASE(PowScalar)
      MIXLAB_UNARY_CASE(AddScalar)
      MIXLAB_UNARY_CASE(MulScalar)
    }
#undef MIXLAB_UNARY_CASE
  });
}

void CpuBackend::binary(BinaryOp op, const View& a, const View& b, const View& out) {
  dispatch_floating(out.dtype, "binary", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<T>();
    const T* pb = b.as<T>();
    T* po = out.as<T>();
    auto body = [&](auto f) {
      cpu::StridedLoop<3>(out, {&a, &b, &out}).run([&](auto off, int64_t n, auto st) {
        const T* x = pa + off[0];
        const T* y = pb + off[1];
        T* z = po + off[2];
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
          for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
        } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
          T yv = y[0];
          for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], yv);
        } else {
          for (int64_t i = 0; i < n; ++i) z[i * st[2]] = f(x[i * st[0]], y[i * st[1]]);
        }
      });
    };
    switch (op) {
      case BinaryOp::Add:
        body([](T x, T y) { return x + y; });
        return;
      case BinaryOp::Sub:
        body([](T x, T y) { return x - y; });
        return;
      case BinaryOp::Mul:
        body([](T x, T y) { return x * y; });
        return;
      case BinaryOp::Div:
        body([](T x, T y) { return x / y; });
        return;
      default:
        body([op](T x, T y) { return apply_binary(op, x, y); });
        return;
    }
  });
}

void CpuBackend::where(const View& cond, const View& a, const View& b, const View& out) {
  dispatch_floating(out.dtype, "where", [&](auto tag) {
    using T = decltype(tag);
    dispatch_all(cond.dtype, [&](auto ctag) {
      using C = decltype(ctag);
      const C* pc = cond.as<C>();
      const T* pa = a.as<T>();
      const T* pb = b.as<T>();
      T* po = out.as<T>();
      cpu::StridedLoop<4>(out, {&cond, &a, &b, &out}).run([&](auto off, int64_t n, auto st) {
        for (int64_t i = 0; i < n; ++i)
          po[off[3] + i * st[3]] =
              pc[off[0] + i * st[0]] != C(0) ? pa[off[1] + i * st[1]] : pb[off[2] + i * st[2]];
      });
    });
  });
}

}  // namespace mixlab
