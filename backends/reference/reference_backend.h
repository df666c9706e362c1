// The reference backend: every kernel of backends/kernels.def in plain, single-threaded C++, each
// one written as the formula of its contract. No vector registers, no thread pool, no caching
// allocator, no build switches: a learner reads a kernel here, and the op harness
// (tests/op_harness.h) holds the fast backends (backends/cpu/, backends/cuda/) to it in float64.
// It is also a device of its own (`--device ref`): host memory, slow and exact.
//
// One file per kernel family: memory.cpp (allocation, copy, fill), elementwise.cpp, reductions.cpp,
// products.cpp (gemm and its epilogue, outer products), rows.cpp (softmax, norms, losses and the
// fused row passes), fft.cpp, circular_conv.cpp (the long convolutions), gathers.cpp (indices,
// embedding rows), dropout.cpp, optimisers.cpp, attention_cores.cpp (the softmax attention and
// synthesizer cores, linear attention) and mixer_cores.cpp (token convolution, external attention's
// normalisation, the spatial gate).
//
// A kernel added to kernels.def is declared here by the same list: until its reference is written
// the link fails, naming ReferenceBackend::<kernel>.
#pragma once
#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "backends/libm_math.h"
#include "core/dtype_dispatch.h"

namespace mixlab {

class ReferenceBackend final : public Backend {
 public:
  const char* name() const override { return "ref"; }
  DeviceType device_type() const override { return DeviceType::Ref; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;

#define MIXLAB_KERNEL(name, params, args, label) void name params override;
#include "backends/kernels.def"
#undef MIXLAB_KERNEL
};

namespace ref {

// The transcendental functions of the shared formulas (backends/elementwise_ops.h,
// backends/fused_ops.h): the C++ library's, in the element's own type.
using Math = LibmMath;

// Where element `flat` (counted in row-major order over `shape`'s axes) lies in a view with
// `strides`, in elements: the index's digits in the shape's mixed radix, times the strides.
inline int64_t strided_offset(const View& shape, const View& strides, int64_t flat) {
  int64_t offset = 0;
  for (int d = shape.ndim - 1; d >= 0; --d) {
    offset += (flat % shape.shape[d]) * strides.strides[d];
    flat /= shape.shape[d];
  }
  return offset;
}

// Element [i0, i1, i2, i3] of a 4-axis strided view ([B, H, rows, cols] operands).
template <typename T>
T& at(const View& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return v.as<T>()[i0 * v.strides[0] + i1 * v.strides[1] + i2 * v.strides[2] + i3 * v.strides[3]];
}

// Layer norm of one row of `cols` values (rows.cpp; add_dropout_layer_norm's second step):
//   mean = Σ x / cols, var = Σ (x − mean)² / cols, rstd = 1 / √(var + eps),
//   y = (x − mean) · rstd · gamma + beta   (gamma, beta null: 1 and 0).
template <typename T>
void layer_norm_row(const T* x, const T* gamma, const T* beta, T* y, int64_t cols, T eps, T& mean,
                    T& rstd) {
  T m = 0, var = 0;
  for (int64_t i = 0; i < cols; ++i) m += x[i];
  m /= T(cols);
  for (int64_t i = 0; i < cols; ++i) var += (x[i] - m) * (x[i] - m);
  var /= T(cols);
  mean = m;
  rstd = T(1) / std::sqrt(var + eps);
  for (int64_t i = 0; i < cols; ++i) {
    T v = (x[i] - m) * rstd;
    if (gamma) v *= gamma[i];
    if (beta) v += beta[i];
    y[i] = v;
  }
}

}  // namespace ref
}  // namespace mixlab
