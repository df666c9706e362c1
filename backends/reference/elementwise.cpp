// Elementwise kernels: each op's formula is apply_unary / apply_binary
// (backends/elementwise_ops.h), the one every backend calls, with the C++ library's exp, log, erf,
// ... (ref::Math).
#include "backends/elementwise_ops.h"
#include "backends/reference/reference_backend.h"

namespace mixlab {
namespace {

// f(x; alpha) for the op chosen at run time.
template <typename T>
T unary_of(UnaryOp op, T x, T alpha) {
  switch (op) {
#define MIXLAB_UNARY_CASE(name) \
  case UnaryOp::name:           \
    return apply_unary<UnaryOp::name, ref::Math>(x, alpha);
    MIXLAB_UNARY_OPS(MIXLAB_UNARY_CASE)
#undef MIXLAB_UNARY_CASE
  }
  fail("unary: unknown op ", static_cast<int>(op));
}

// a op b for the op chosen at run time.
template <typename T>
T binary_of(BinaryOp op, T a, T b) {
  switch (op) {
#define MIXLAB_BINARY_CASE(name) \
  case BinaryOp::name:           \
    return apply_binary<BinaryOp::name>(a, b);
    MIXLAB_BINARY_OPS(MIXLAB_BINARY_CASE)
#undef MIXLAB_BINARY_CASE
  }
  fail("binary: unknown op ", static_cast<int>(op));
}

}  // namespace

// y[i] = f(x[i]; alpha)
void ReferenceBackend::unary(UnaryOp op, const View& x, const View& y, double alpha) {
  dispatch_floating(x.dtype, "unary", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i)
      y.as<T>()[i] = unary_of(op, x.as<T>()[i], static_cast<T>(alpha));
  });
}

// out[i] = a[i] op b[i], a and b broadcast to out's shape by their strides.
void ReferenceBackend::binary(BinaryOp op, const View& a, const View& b, const View& out) {
  dispatch_floating(out.dtype, "binary", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < out.numel(); ++i)
      out.as<T>()[i] = binary_of(op, a.as<T>()[ref::strided_offset(out, a, i)],
                                 b.as<T>()[ref::strided_offset(out, b, i)]);
  });
}

// out[i] = cond[i] != 0 ? a[i] : b[i]
void ReferenceBackend::where(const View& cond, const View& a, const View& b, const View& out) {
  dispatch_floating(out.dtype, "where", [&](auto tag) {
    using T = decltype(tag);
    dispatch_all(cond.dtype, [&](auto ctag) {
      using C = decltype(ctag);
      for (int64_t i = 0; i < out.numel(); ++i)
        out.as<T>()[ref::strided_offset(out, out, i)] =
            cond.as<C>()[ref::strided_offset(out, cond, i)] != C(0)
                ? a.as<T>()[ref::strided_offset(out, a, i)]
                : b.as<T>()[ref::strided_offset(out, b, i)];
    });
  });
}

}  // namespace mixlab
