// gMLP's and aMLP's spatial gate (kernels.def: spatial_gate), forward and backward side by side:
//
//   forward:   y[b, t, c] = z[b, t, c] · (g[b, t, c] + bias[t])
//   backward:  dg = dy ⊙ z,  dz = dy ⊙ (g + bias[t]),  row_sums[b, t] = Σ_c dg[b, t, c]
//
// Rows (b, t) split over threads; each row's sum is one thread's, in a fixed order, so the
// results do not depend on the thread count. The forward's loop is plain (the compiler
// vectorises it: no sum crosses its elements); the backward's row sum runs in vector registers
// for float32 (a sum of floats in order would not be vectorised).
#include <type_traits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/simd/float_rows.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

template <typename T>
T gate_backward_row(const T* dy, const T* g, T bias, const T* z, T* dg, T* dz, int64_t channels) {
  T total = 0;
  int64_t c = 0;
  if constexpr (std::is_same_v<T, float>)  // whole registers first (simd/float_rows.h)
    c = cpu::simd::gate_backward_lanes(dy, g, bias, z, dg, dz, channels, total);
  for (; c < channels; ++c) {  // every element without vector registers, or the row's tail
    dg[c] = dy[c] * z[c];
    dz[c] = dy[c] * (g[c] + bias);
    total += dg[c];
  }
  return total;
}

}  // namespace

void CpuBackend::spatial_gate(const View& g, const View& bias, const View& z, const View& y,
                              int64_t batch, int64_t tokens, int64_t channels) {
  dispatch_floating(g.dtype, "spatial_gate", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(batch * tokens, cpu::rows_per_task(channels), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const T* gr = g.as<T>() + r * channels;
        const T* zr = z.as<T>() + r * channels;
        T* yr = y.as<T>() + r * channels;
        const T b = bias.as<T>()[r % tokens];
        for (int64_t c = 0; c < channels; ++c) yr[c] = zr[c] * (gr[c] + b);
      }
    });
  });
}

void CpuBackend::spatial_gate_backward(const View& dy, const View& g, const View& bias,
                                       const View& z, const View& dg, const View& dz,
                                       const View& row_sums, int64_t batch, int64_t tokens,
                                       int64_t channels) {
  dispatch_floating(dy.dtype, "spatial_gate_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(batch * tokens, cpu::rows_per_task(channels), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const int64_t at = r * channels;
        row_sums.as<T>()[r] =
            gate_backward_row(dy.as<T>() + at, g.as<T>() + at, bias.as<T>()[r % tokens],
                              z.as<T>() + at, dg.as<T>() + at, dz.as<T>() + at, channels);
      }
    });
  });
}

}  // namespace mixlab
