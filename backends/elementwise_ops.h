// The elementwise ops and their formulas, written once for the CPU and the CUDA kernels
// (MIXLAB_HOST_DEVICE): the CPU loops (backends/cpu/cpu_elementwise.cpp) and the CUDA kernels
// (backends/cuda/elementwise.cu) both call apply_unary / apply_binary, so the CPU really is the
// GPU's specification. Each backend hands in its own transcendental functions (a `Math` policy:
// exp, log, sqrt, tanh, erf, pow for float and double): the CPU's float exp and erf are the
// vectorisable polynomials of backends/cpu/simd/fast_math.h, the GPU's are CUDA's.
//
// A new unary op is one X(...) entry in MIXLAB_UNARY_OPS and one `if constexpr` branch below:
// both backends' kernels are generated from the list (docs/kernels.md walks through one).
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace mixlab {

// y = f(x; alpha). The *Grad entries are derivatives f'(x) used by backward.
#define MIXLAB_UNARY_OPS(X)           \
  X(Neg)                              \
  X(Exp)                              \
  X(Log)                              \
  X(Sqrt)                             \
  X(Abs)                              \
  X(Sign)                             \
  X(Relu)                             \
  X(Sigmoid)                          \
  X(Tanh)                             \
  X(Sin)                              \
  X(Cos)                              \
  X(GeluErf)                          \
  X(GeluTanh)                         \
  X(GeluErfGrad)                      \
  X(GeluTanhGrad)                     \
  X(PowScalar)  /* x^alpha */         \
  X(AddScalar)  /* x + alpha */       \
  X(MulScalar)  /* x * alpha */       \
  X(Softplus)   /* log(1 + exp(x)) */ \
  X(EluPlusOne) /* elu(x) + 1 */      \
  X(EluPlusOneGrad)                   \
  X(ClipCoef) /* gradient clipping's factor for a norm x, limit alpha */

// ReluGrad: relu's gradient dy · step(x) (a = dy, b = x) in one pass, as PyTorch's
// threshold_backward (a unary step op and then Mul had taken two passes and a temporary).
#define MIXLAB_BINARY_OPS(X) \
  X(Add) X(Sub) X(Mul) X(Div) X(Maximum) X(Minimum) X(Equal) X(Greater) X(ReluGrad)

#define MIXLAB_ENUMERATOR(name) name,
enum class UnaryOp : uint8_t { MIXLAB_UNARY_OPS(MIXLAB_ENUMERATOR) };
enum class BinaryOp : uint8_t { MIXLAB_BINARY_OPS(MIXLAB_ENUMERATOR) };
#undef MIXLAB_ENUMERATOR

namespace formula {
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)
}  // namespace formula

// One op as a compile-time constant, so each op's loop is its own (vectorisable) loop.
template <UnaryOp OP, typename M, typename T>
MIXLAB_HOST_DEVICE T apply_unary(T x, T alpha) {
  using namespace formula;
  if constexpr (OP == UnaryOp::Neg)
    return -x;
  else if constexpr (OP == UnaryOp::Exp)
    return M::exp(x);
  else if constexpr (OP == UnaryOp::Log)
    return M::log(x);
  else if constexpr (OP == UnaryOp::Sqrt)
    return M::sqrt(x);
  else if constexpr (OP == UnaryOp::Abs)
    return x < T(0) ? -x : x;
  else if constexpr (OP == UnaryOp::Sign)
    return static_cast<T>((x > 0) - (x < 0));
  else if constexpr (OP == UnaryOp::Relu)
    return x > 0 ? x : T(0);
  else if constexpr (OP == UnaryOp::Sigmoid)
    return T(1) / (T(1) + M::exp(-x));
  else if constexpr (OP == UnaryOp::Tanh)
    return M::tanh(x);
  else if constexpr (OP == UnaryOp::Sin)
    return M::sin(x);
  else if constexpr (OP == UnaryOp::Cos)
    return M::cos(x);
  else if constexpr (OP == UnaryOp::GeluErf)
    return T(0.5) * x * (T(1) + M::erf(x * T(kInvSqrt2)));
  else if constexpr (OP == UnaryOp::GeluTanh) {
    T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + M::tanh(inner));
  } else if constexpr (OP == UnaryOp::GeluErfGrad) {  // Φ(x) + x φ(x)
    // x φ(x) with x clamped to ±1e4, where φ is exactly 0 already: at x = ±inf the product
    // would be inf · 0 = NaN instead of its limit 0. NaN compares false and stays NaN.
    T xc = x < T(-1e4) ? T(-1e4) : (x > T(1e4) ? T(1e4) : x);
    return T(0.5) * (T(1) + M::erf(x * T(kInvSqrt2))) +
           xc * T(kInvSqrt2Pi) * M::exp(T(-0.5) * xc * xc);
  } else if constexpr (OP == UnaryOp::GeluTanhGrad) {
    T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    T t = M::tanh(inner);
    T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
  } else if constexpr (OP == UnaryOp::PowScalar)
    return M::pow(x, alpha);
  else if constexpr (OP == UnaryOp::AddScalar)
    return x + alpha;
  else if constexpr (OP == UnaryOp::MulScalar)
    return x * alpha;
  else if constexpr (OP == UnaryOp::Softplus)
    return (x > T(0) ? x : T(0)) + M::log(T(1) + M::exp(x < T(0) ? x : -x));
  else if constexpr (OP ==
                     UnaryOp::EluPlusOne)  // relu(x) + exp(min(x, 0)): x + 1 above 0, eˣ below
    return (x > T(0) ? x : T(0)) + M::exp(x < T(0) ? x : T(0));
  else if constexpr (OP == UnaryOp::EluPlusOneGrad)
    return M::exp(x < T(0) ? x : T(0));  // 1 above 0 (e⁰), eˣ below; no select to branch on
  else {
    // torch.nn.utils.clip_grad_norm_'s alpha / (x + 1e-6) where that is below 1, else 1; and 1
    // for a norm that is not finite (x - x is NaN for inf and NaN), which leaves the gradients
    // as they are for the caller to see. Computed on the device so that clipping never reads the
    // norm back (train/optim/grad_utils.h).
    static_assert(OP == UnaryOp::ClipCoef, "apply_unary: an op of MIXLAB_UNARY_OPS has no formula");
    T coef = alpha / (x + T(1e-6));
    return (x - x == T(0) && coef < T(1)) ? coef : T(1);
  }
}

template <BinaryOp OP, typename T>
MIXLAB_HOST_DEVICE T apply_binary(T a, T b) {
  if constexpr (OP == BinaryOp::Add)
    return a + b;
  else if constexpr (OP == BinaryOp::Sub)
    return a - b;
  else if constexpr (OP == BinaryOp::Mul)
    return a * b;
  else if constexpr (OP == BinaryOp::Div)
    return a / b;
  else if constexpr (OP == BinaryOp::Maximum)
    return a >= b ? a : b;
  else if constexpr (OP == BinaryOp::Minimum)
    return a <= b ? a : b;
  else if constexpr (OP == BinaryOp::Equal)
    return a == b ? T(1) : T(0);
  else if constexpr (OP == BinaryOp::ReluGrad)
    // dy · step(x) with NaN · 0 = NaN spelled out: written as a product, the vectoriser turns it
    // into a select under the kernels' -fno-signed-zeros (seen with AVX-512) and drops the NaN.
    return b > 0 || a != a ? a : T(0);
  else {
    static_assert(OP == BinaryOp::Greater,
                  "apply_binary: an op of MIXLAB_BINARY_OPS has no formula");
    return a > b ? T(1) : T(0);
  }
}

}  // namespace mixlab
