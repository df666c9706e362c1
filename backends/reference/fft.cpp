// Fourier transforms (FNet) by the DFT's definition,
//   X[k] = Σ_t x[t] · e^{∓2πi·kt/n},
// summed in float64, the factor e^{−2πi·j/n} taken from a table of the n angles 2π·j/n (kt mod n).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/reference/reference_backend.h"

namespace mixlab {
namespace {

// cos and sin of 2π·j/n for j in [0, n): the DFT's factor for the product kt is entry kt mod n.
struct Angles {
  std::vector<double> cos, sin;
  explicit Angles(int64_t n) : cos(n), sin(n) {
    for (int64_t j = 0; j < n; ++j) {
      cos[j] = std::cos(2 * M_PI * double(j) / double(n));
      sin[j] = std::sin(2 * M_PI * double(j) / double(n));
    }
  }
};

}  // namespace

// y[o, k, i] = Σ_t x[o, t, i] · e^{∓2πi·kt/n} (complex, interleaved; inverse: +, unnormalised)
void ReferenceBackend::fft(const View& x, const View& y, int64_t outer, int64_t n, int64_t inner,
                           bool inverse) {
  dispatch_floating(x.dtype, "fft", [&](auto tag) {
    using T = decltype(tag);
    const Angles w(n);
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t k = 0; k < n; ++k) {
          double re = 0, im = 0;
          for (int64_t t = 0; t < n; ++t) {
            const T* v = x.as<T>() + ((o * n + t) * inner + i) * 2;
            const double c = w.cos[(k * t) % n], s = sign * w.sin[(k * t) % n];
            re += v[0] * c - v[1] * s;  // (a + ib)(c + is)
            im += v[0] * s + v[1] * c;
          }
          T* out = y.as<T>() + ((o * n + k) * inner + i) * 2;
          out[0] = static_cast<T>(re);
          out[1] = static_cast<T>(im);
        }
      }
    }
  });
}

// For each item b, over its first L = lengths[b] rows (n without lengths):
//   y[k, l] = Re Σ_t Σ_c x[t, c] · e^{−2πi(kt/L + lc/d)},  rows k ≥ L of y are 0.
// The double sum in two steps: F[t, l] = Σ_c x[t, c] · e^{−2πi·lc/d} along the channels, then
// y[k, l] = Re Σ_t F[t, l] · e^{−2πi·kt/L} along the tokens.
void ReferenceBackend::fft2_real(const View& x, const View& lengths, const View& y, int64_t batch,
                                 int64_t n, int64_t d) {
  dispatch_floating(x.dtype, "fft2_real", [&](auto tag) {
    using T = decltype(tag);
    const Angles wd(d);
    std::vector<double> fre(n * d), fim(n * d);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lengths.data ? std::clamp<int64_t>(lengths.as<int32_t>()[b], 0, n) : n;
      const Angles wn(std::max<int64_t>(len, 1));
      const T* in = x.as<T>() + b * n * d;
      T* out = y.as<T>() + b * n * d;
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t l = 0; l < d; ++l) {
          double re = 0, im = 0;
          for (int64_t c = 0; c < d; ++c) {
            re += in[t * d + c] * wd.cos[(l * c) % d];
            im -= in[t * d + c] * wd.sin[(l * c) % d];
          }
          fre[t * d + l] = re, fim[t * d + l] = im;
        }
      }
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t l = 0; l < d; ++l) {
          double re = 0;  // Re((a + ib)(cos θ − i sin θ)) = a cos θ + b sin θ
          for (int64_t t = 0; k < len && t < len; ++t)
            re += fre[t * d + l] * wn.cos[(k * t) % len] + fim[t * d + l] * wn.sin[(k * t) % len];
          out[k * d + l] = static_cast<T>(re);  // 0 for the rows k ≥ len
        }
      }
    }
  });
}

}  // namespace mixlab
