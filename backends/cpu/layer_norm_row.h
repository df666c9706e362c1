// One row of layer norm, shared by the layer_norm kernel (cpu_rows.cpp) and the fused residual
// kernel (cpu_fused.cpp) so both normalise with the same operations in the same order.
#pragma once
#include <cmath>
#include <cstdint>

namespace mixlab::cpu {

// out = (in - mean) * rstd * gamma + beta over one row of `cols` (biased variance); gamma and
// beta may be null. Writes the row's mean and rstd.
template <typename T>
inline void layer_norm_row(const T* in, const T* gamma, const T* beta, T* out, int64_t cols, T eps,
                           T& mean, T& rstd) {
  T m = 0;
  for (int64_t i = 0; i < cols; ++i) m += in[i];
  m /= T(cols);
  T var = 0;
  for (int64_t i = 0; i < cols; ++i) var += (in[i] - m) * (in[i] - m);
  var /= T(cols);
  T rs = T(1) / std::sqrt(var + eps);
  mean = m;
  rstd = rs;
  for (int64_t i = 0; i < cols; ++i) {
    T v = (in[i] - m) * rs;
    if (gamma) v *= gamma[i];
    if (beta) v += beta[i];
    out[i] = v;
  }
}

}  // namespace mixlab::cpu
