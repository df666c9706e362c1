// logcumsumexp's walk along one column, forward and backward, written once for the CPU
// (cpu/cpu_reduce.cpp) and the GPU's thread-per-column kernels (cuda/reduce.cu). A column is n
// elements `stride` apart. M is the backend's math policy (M::exp, M::log).
//
//   forward:   y_j = log Σ_{i ≤ j} exp(x_i), as y_j = log(exp(y_{j-1}) + exp(x_j)) shifted by
//              the larger of the two
//   backward:  dx_j = exp(x_j) Σ_{i ≥ j} dy_i exp(-y_i) = s_j exp(x_j - y_j), with
//              s_j = dy_j + exp(y_j - y_{j+1}) s_{j+1}; y is non-decreasing along the column, so
//              every exponent is ≤ 0 and the recursion is stable
#pragma once
#include <cstdint>
#include <limits>

#include "core/host_device.h"

namespace mixlab::scan {

template <typename M, typename T>
MIXLAB_HOST_DEVICE void logcumsumexp_column(const T* x, T* y, int64_t n, int64_t stride) {
  constexpr T kNone = -std::numeric_limits<T>::infinity();
  T running = kNone;
  for (int64_t j = 0; j < n; ++j) {
    const T v = x[j * stride];
    const T hi = running < v ? v : running;
    running = hi == kNone ? hi : hi + M::log(M::exp(running - hi) + M::exp(v - hi));
    y[j * stride] = running;
  }
}

template <typename M, typename T>
MIXLAB_HOST_DEVICE void logcumsumexp_backward_column(const T* x, const T* y, const T* dy, T* dx,
                                                     int64_t n, int64_t stride) {
  T s = 0;
  for (int64_t j = n - 1; j >= 0; --j) {
    const int64_t k = j * stride;
    if (j + 1 < n) s *= M::exp(y[k] - y[k + stride]);
    s += dy[k];
    dx[k] = s * M::exp(x[k] - y[k]);
  }
}

}  // namespace mixlab::scan
