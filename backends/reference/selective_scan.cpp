// The selective scan's plain loops (the formulas are in selective_scan.h): one item and one
// channel at a time, in token order, nothing parallel, nothing fused.
#include "backends/reference/selective_scan.h"

#include "backends/reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mixlab::reference {

template <typename T>
void selective_scan(const T* u, const T* delta, const T* a, const T* b, const T* c, const T* d,
                    T* y, ScanDims s) {
  const int64_t E = s.channels, n = s.state;
  std::vector<T> h(static_cast<size_t>(n));
  for (int64_t item = 0; item < s.batch; ++item)
    for (int64_t ch = 0; ch < E; ++ch) {
      std::fill(h.begin(), h.end(), T(0));
      for (int64_t i = 0; i < s.tokens; ++i) {
        const int64_t row = item * s.tokens + i, at = row * E + ch;
        T out = 0;
        for (int64_t k = 0; k < n; ++k) {
          h[k] = std::exp(delta[at] * a[ch * n + k]) * h[k] + delta[at] * b[row * n + k] * u[at];
          out += c[row * n + k] * h[k];
        }
        y[at] = out + d[ch] * u[at];
      }
    }
}

template <typename T>
void selective_scan_backward(const T* u, const T* delta, const T* a, const T* b, const T* c,
                             const T* d, const T* dy, T* du, T* ddelta, T* da, T* db, T* dc, T* dd,
                             ScanDims s) {
  const int64_t E = s.channels, n = s.state, N = s.tokens;
  std::fill(da, da + E * n, T(0));
  std::fill(db, db + s.batch * N * n, T(0));
  std::fill(dc, dc + s.batch * N * n, T(0));
  std::fill(dd, dd + E, T(0));
  // h[(i + 1) · n + k] = h_i[k]; h[k] = h_{−1}[k] = 0.
  std::vector<T> h(static_cast<size_t>((N + 1) * n)), dh(static_cast<size_t>(n));
  for (int64_t item = 0; item < s.batch; ++item)
    for (int64_t ch = 0; ch < E; ++ch) {
      std::fill(h.begin(), h.end(), T(0));
      for (int64_t i = 0; i < N; ++i) {
        const int64_t row = item * N + i, at = row * E + ch;
        for (int64_t k = 0; k < n; ++k)
          h[(i + 1) * n + k] = std::exp(delta[at] * a[ch * n + k]) * h[i * n + k] +
                               delta[at] * b[row * n + k] * u[at];
      }
      std::fill(dh.begin(), dh.end(), T(0));  // exp(Δ_{i+1} A) ⊙ dh_{i+1}, carried backwards
      for (int64_t i = N - 1; i >= 0; --i) {
        const int64_t row = item * N + i, at = row * E + ch;
        const T g = dy[at], dt = delta[at];
        T du_sum = 0, ddelta_sum = 0;
        for (int64_t k = 0; k < n; ++k) {
          const T decay = std::exp(dt * a[ch * n + k]);
          const T dh_i = c[row * n + k] * g + dh[k];
          const T h_prev = h[i * n + k];
          du_sum += dh_i * dt * b[row * n + k];
          ddelta_sum += dh_i * (a[ch * n + k] * decay * h_prev + b[row * n + k] * u[at]);
          da[ch * n + k] += dh_i * dt * decay * h_prev;
          db[row * n + k] += dh_i * dt * u[at];
          dc[row * n + k] += g * h[(i + 1) * n + k];
          dh[k] = decay * dh_i;
        }
        du[at] = du_sum + d[ch] * g;
        ddelta[at] = ddelta_sum;
        dd[ch] += g * u[at];
      }
    }
}

template void selective_scan<float>(const float*, const float*, const float*, const float*,
                                    const float*, const float*, float*, ScanDims);
template void selective_scan<double>(const double*, const double*, const double*, const double*,
                                     const double*, const double*, double*, ScanDims);
template void selective_scan_backward<float>(const float*, const float*, const float*, const float*,
                                             const float*, const float*, const float*, float*,
                                             float*, float*, float*, float*, float*, ScanDims);
template void selective_scan_backward<double>(const double*, const double*, const double*,
                                              const double*, const double*, const double*,
                                              const double*, double*, double*, double*, double*,
                                              double*, double*, ScanDims);

}  // namespace mixlab::reference

namespace mixlab {

// The kernels of backends/kernels.def: the loops above in the views' element type.
void ReferenceBackend::selective_scan(const View& u, const View& delta, const View& a,
                                      const View& b, const View& c, const View& d, const View& y) {
  const reference::ScanDims s{u.shape[0], u.shape[1], u.shape[2], a.shape[1]};
  dispatch_floating(u.dtype, "selective_scan", [&](auto tag) {
    using T = decltype(tag);
    reference::selective_scan(u.as<T>(), delta.as<T>(), a.as<T>(), b.as<T>(), c.as<T>(), d.as<T>(),
                              y.as<T>(), s);
  });
}

void ReferenceBackend::selective_scan_backward(const View& u, const View& delta, const View& a,
                                               const View& b, const View& c, const View& d,
                                               const View& dy, const View& du, const View& ddelta,
                                               const View& da, const View& db, const View& dc,
                                               const View& dd) {
  const reference::ScanDims s{u.shape[0], u.shape[1], u.shape[2], a.shape[1]};
  dispatch_floating(u.dtype, "selective_scan_backward", [&](auto tag) {
    using T = decltype(tag);
    reference::selective_scan_backward(u.as<T>(), delta.as<T>(), a.as<T>(), b.as<T>(), c.as<T>(),
                                       d.as<T>(), dy.as<T>(), du.as<T>(), ddelta.as<T>(),
                                       da.as<T>(), db.as<T>(), dc.as<T>(), dd.as<T>(), s);
  });
}

}  // namespace mixlab
