// Elementwise kernels: one strided loop for all ops; each op's formula is shared with the CUDA
// kernels (backends/elementwise_ops.h) and each op gets its own loop, generated from the op lists.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/simd/float_rows.h"
#include "core/dtype_dispatch.h"

namespace mixlab {
namespace {

// The switch sits outside the loop: each op gets its own vectorisable inner loop.
template <typename T, typename F>
void unary_loop(const T* x, T* y, int64_t n, const F& f) {
  parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

// Float ops with a row in vector registers (simd/float_rows.h; exp and erf there take a register
// per instruction, where the generic loop's scalar calls take an element). False: not one of
// them, or a build without registers for them.
bool lanes_unary(UnaryOp op, const float* x, float* y, int64_t n) {
  if (!cpu::simd::kFloatRows) return false;
  auto rows = [&](auto row) {
    parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) { row(x + b, y + b, e - b); });
    return true;
  };
  switch (op) {
    case UnaryOp::GeluErf:
      return rows(
          [](const float* in, float* out, int64_t count) { cpu::simd::gelu_row(in, out, count); });
    case UnaryOp::GeluErfGrad:
      return rows([](const float* in, float* out, int64_t count) {
        cpu::simd::gelu_slope_row(in, out, count);
      });
    case UnaryOp::EluPlusOne:
    case UnaryOp::EluPlusOneGrad: {
      const bool gradient = op == UnaryOp::EluPlusOneGrad;
      return rows([gradient](const float* in, float* out, int64_t count) {
        cpu::simd::elu_plus_one_row(in, out, count, gradient);
      });
    }
    default:
      return false;
  }
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const View& x, const View& y, double alpha) {
  if (x.dtype == DType::F32 && lanes_unary(op, x.as<float>(), y.as<float>(), x.numel())) return;
  dispatch_floating(x.dtype, "unary", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    T a = static_cast<T>(alpha);
    int64_t n = x.numel();
#define MIXLAB_UNARY_CASE(OP)                                                             \
  case UnaryOp::OP:                                                                       \
    unary_loop(in, out, n, [a](T v) { return apply_unary<UnaryOp::OP, CpuMath>(v, a); }); \
    return;
    switch (op) { MIXLAB_UNARY_OPS(MIXLAB_UNARY_CASE) }
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
        } else if (st[0] == 0 && st[1] == 1 && st[2] == 1) {
          T xv = x[0];
          for (int64_t i = 0; i < n; ++i) z[i] = f(xv, y[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) z[i * st[2]] = f(x[i * st[0]], y[i * st[1]]);
        }
      });
    };
#define MIXLAB_BINARY_CASE(OP)                                       \
  case BinaryOp::OP:                                                 \
    body([](T x, T y) { return apply_binary<BinaryOp::OP>(x, y); }); \
    return;
    switch (op) { MIXLAB_BINARY_OPS(MIXLAB_BINARY_CASE) }
#undef MIXLAB_BINARY_CASE
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
