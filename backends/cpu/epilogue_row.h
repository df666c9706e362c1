// The per-row passes of a linear layer's bias and GELU, written once for the three kernels that
// run them: bias_act and bias_gelu_backward (a pass of their own over a product's output) and
// gemm_epilogue (the same pass on a piece of a row of C just computed, still in L1). One code
// path, so the fused and unfused kernels give the same bits for the same product.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/backend.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/simd/float_rows.h"
#include "backends/fused_ops.h"

namespace mixlab::cpu {

// pre = x + bias over cols elements (pre may be x itself).
template <typename T>
inline void bias_row(const T* x, const T* bias, T* pre, int64_t cols) {
  for (int64_t i = 0; i < cols; ++i) pre[i] = x[i] + bias[i];
}

// y = gelu_erf(pre). Its own loop over pointers that do not alias, so GELU's polynomials
// vectorise. Floats on AVX-512 or AVX2 take vector_math.h's version (4x faster with AVX-512,
// float32 rounding).
template <typename T>
inline void gelu_row(const T* __restrict pre, T* __restrict y, int64_t cols) {
  if constexpr (std::is_same_v<T, float>)
    if (simd::gelu_row(pre, y, cols)) return;
  for (int64_t i = 0; i < cols; ++i) y[i] = apply_unary<UnaryOp::GeluErf, CpuMath>(pre[i], T(0));
}

// dx = dy · gelu_erf'(pre) (dx may be dy itself).
template <typename T>
inline void gelu_grad_row(const T* dy, const T* __restrict pre, T* dx, int64_t cols) {
  if constexpr (std::is_same_v<T, float>)
    if (simd::gelu_grad_row(dy, pre, dx, cols)) return;
  for (int64_t i = 0; i < cols; ++i) dx[i] = fused::bias_gelu_grad<CpuMath>(dy[i], pre[i]);
}

// y = gelu_erf(pre) and slope = gelu_erf'(pre): BiasGeluSlope's pass, so the backward multiplies
// by the slope instead of recomputing it (the same bits as gelu_grad_row). slope may be pre
// itself. stream (float32 on AVX-512 or AVX2, slope on a cache line and not pre): the slope is
// streamed to memory (vector_math.h), for the tall kernel's rows computed in a
// buffer of their own.
template <typename T>
inline void gelu_and_slope_row(const T* pre, T* __restrict y, T* slope, int64_t cols,
                               bool stream = false) {
  if constexpr (std::is_same_v<T, float>)
    if (simd::gelu_and_slope_row(pre, y, slope, cols, stream)) return;
  for (int64_t i = 0; i < cols; ++i) {
    const T x = pre[i];
    y[i] = apply_unary<UnaryOp::GeluErf, CpuMath>(x, T(0));
    slope[i] = apply_unary<UnaryOp::GeluErfGrad, CpuMath>(x, T(0));
  }
}

// c *= factor over cols elements.
template <typename T>
inline void times_row(T* c, const T* __restrict factor, int64_t cols) {
  for (int64_t i = 0; i < cols; ++i) c[i] *= factor[i];
}

// gemm_epilogue's pass over cols elements of one row of C; bias and aux point at the same
// columns (bias unused by Times).
template <typename T>
inline void epilogue_row(GemmEpilogue epilogue, T* c, const T* bias, T* aux, int64_t cols) {
  switch (epilogue) {
    case GemmEpilogue::Bias:
      bias_row(c, bias, c, cols);
      break;
    case GemmEpilogue::BiasGelu:
      bias_row(c, bias, c, cols);
      gelu_row(c, aux, cols);
      break;
    case GemmEpilogue::BiasGeluSlope:
      bias_row(c, bias, c, cols);
      gelu_and_slope_row(c, aux, c, cols);
      break;
    case GemmEpilogue::Times:
      times_row(c, aux, cols);
      break;
    case GemmEpilogue::RowSums:  // no pass over C (cpu_gemm.cpp takes the sums with A)
      break;
  }
}

}  // namespace mixlab::cpu
