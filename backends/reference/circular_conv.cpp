// The circular convolution along the tokens (s4d's and hyena's long convolutions) and its
// adjoints by their direct sums, O(n²) per channel, accumulated in float64:
//   y[b, i, c]  = Σ_{j<n} k[(i − j) mod L, c] · x[b, j, c]                       (i < n)
//   dx[b, j, c] = Σ_{i<n} k[(i − j) mod L, c] · dy[b, i, c]                      (j < n)
//   dk[l, c]    = Σ_b Σ_{i<n} dy[b, i, c] · x[b, (i − l) mod L, c], that index < n (l < L)
#include "backends/reference/reference_backend.h"

namespace mixlab {
namespace {

// (a − b) mod L for a, b in [0, L).
int64_t wrap(int64_t a, int64_t b, int64_t length) { return (a - b + length) % length; }

}  // namespace

void ReferenceBackend::circular_conv(const View& x, const View& k, const View& y, int64_t batch,
                                     int64_t n, int64_t d, int64_t length) {
  dispatch_floating(x.dtype, "circular_conv", [&](auto tag) {
    using T = decltype(tag);
    const T *xs = x.as<T>(), *ks = k.as<T>();
    T* ys = y.as<T>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < d; ++c) {
          double sum = 0;
          for (int64_t j = 0; j < n; ++j)
            sum += double(ks[wrap(i, j, length) * d + c]) * double(xs[(b * n + j) * d + c]);
          ys[(b * n + i) * d + c] = static_cast<T>(sum);
        }
  });
}

void ReferenceBackend::circular_conv_backward(const View& x, const View& k, const View& dy,
                                              const View& dx, const View& dk, int64_t batch,
                                              int64_t n, int64_t d, int64_t length) {
  dispatch_floating(x.dtype, "circular_conv_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *xs = x.as<T>(), *ks = k.as<T>(), *g = dy.as<T>();
    T *gx = dx.as<T>(), *gk = dk.as<T>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < d; ++c) {
          double sum = 0;
          for (int64_t i = 0; i < n; ++i)
            sum += double(ks[wrap(i, j, length) * d + c]) * double(g[(b * n + i) * d + c]);
          gx[(b * n + j) * d + c] = static_cast<T>(sum);
        }
    for (int64_t l = 0; l < length; ++l)
      for (int64_t c = 0; c < d; ++c) {
        double sum = 0;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t i = 0; i < n; ++i) {
            const int64_t j = wrap(i, l, length);
            if (j < n) sum += double(g[(b * n + i) * d + c]) * double(xs[(b * n + j) * d + c]);
          }
        gk[l * d + c] = static_cast<T>(sum);
      }
  });
}

}  // namespace mixlab
