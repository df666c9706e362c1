// Fourier transforms on FFTW. Plans are made once per (precision, kind, size) with
// FFTW_ESTIMATE (deterministic: FFTW_MEASURE may pick different algorithms run to run) and
// reused through FFTW's new-array execute on aligned scratch buffers.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm_rows.h"
#include "backends/cpu/strided.h"
#include "core/dtype_dispatch.h"

namespace mixlab {
namespace {

// The FFTW API for one precision.
template <typename T>
struct Fftw;
template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static void* alloc(size_t bytes) { return fftw_malloc(bytes); }
  static void free(void* p) { fftw_free(p); }
  static Plan plan_1d(int n, int sign) {
    // Out of place, as it is executed (fft() below): a plan's new-array execution must keep the
    // plan's in-place-ness, and an in-place plan of size 1 never wrote the output.
    auto* in = static_cast<Complex*>(alloc(sizeof(Complex) * n));
    auto* out = static_cast<Complex*>(alloc(sizeof(Complex) * n));
    Plan p = fftw_plan_dft_1d(n, in, out, sign, FFTW_ESTIMATE);
    free(in);
    free(out);
    return p;
  }
  static Plan plan_r2c_2d(int n, int d) {
    auto* in = static_cast<double*>(alloc(sizeof(double) * n * d));
    auto* out = static_cast<Complex*>(alloc(sizeof(Complex) * n * (d / 2 + 1)));
    Plan p = fftw_plan_dft_r2c_2d(n, d, in, out, FFTW_ESTIMATE);
    free(in);
    free(out);
    return p;
  }
  static Plan plan_r2c_1d(int d) {
    auto* in = static_cast<double*>(alloc(sizeof(double) * d));
    auto* out = static_cast<Complex*>(alloc(sizeof(Complex) * (d / 2 + 1)));
    Plan p = fftw_plan_dft_r2c_1d(d, in, out, FFTW_ESTIMATE);
    free(in);
    free(out);
    return p;
  }
  static Plan plan_columns(int length, int d, bool inverse) {
    // `d` transforms of `length` along the rows of a [length, d] block (stride d): real to its
    // half spectrum [length / 2 + 1, d], or back (c2r, which may overwrite its input).
    auto* real = static_cast<double*>(alloc(sizeof(double) * length * d));
    auto* spectrum = static_cast<Complex*>(alloc(sizeof(Complex) * (length / 2 + 1) * d));
    Plan p = inverse ? fftw_plan_many_dft_c2r(1, &length, d, spectrum, nullptr, d, 1, real, nullptr,
                                              d, 1, FFTW_ESTIMATE)
                     : fftw_plan_many_dft_r2c(1, &length, d, real, nullptr, d, 1, spectrum, nullptr,
                                              d, 1, FFTW_ESTIMATE);
    free(real);
    free(spectrum);
    return p;
  }
  static void exec_dft(Plan p, Complex* in, Complex* out) { fftw_execute_dft(p, in, out); }
  static void exec_r2c(Plan p, double* in, Complex* out) { fftw_execute_dft_r2c(p, in, out); }
  static void exec_c2r(Plan p, Complex* in, double* out) { fftw_execute_dft_c2r(p, in, out); }
  static int alignment_of(const double* p) { return fftw_alignment_of(const_cast<double*>(p)); }
  static void destroy(Plan p) { fftw_destroy_plan(p); }
  static void cleanup() { fftw_cleanup(); }
};
template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  static void* alloc(size_t bytes) { return fftwf_malloc(bytes); }
  static void free(void* p) { fftwf_free(p); }
  static Plan plan_1d(int n, int sign) {
    auto* in = static_cast<Complex*>(alloc(sizeof(Complex) * n));
    auto* out = static_cast<Complex*>(alloc(sizeof(Complex) * n));
    Plan p = fftwf_plan_dft_1d(n, in, out, sign, FFTW_ESTIMATE);
    free(in);
    free(out);
    return p;
  }
  static Plan plan_r2c_2d(int n, int d) {
    auto* in = static_cast<float*>(alloc(sizeof(float) * n * d));
    auto* out = static_cast<Complex*>(alloc(sizeof(Complex) * n * (d / 2 + 1)));
    Plan p = fftwf_plan_dft_r2c_2d(n, d, in, out, FFTW_ESTIMATE);
    free(in);
    free(out);
    return p;
  }
  static Plan plan_r2c_1d(int d) {
    auto* in = static_cast<float*>(alloc(sizeof(float) * d));
    auto* out = static_cast<Complex*>(alloc(sizeof(Complex) * (d / 2 + 1)));
    Plan p = fftwf_plan_dft_r2c_1d(d, in, out, FFTW_ESTIMATE);
    free(in);
    free(out);
    return p;
  }
  static Plan plan_columns(int length, int d, bool inverse) {
    auto* real = static_cast<float*>(alloc(sizeof(float) * length * d));
    auto* spectrum = static_cast<Complex*>(alloc(sizeof(Complex) * (length / 2 + 1) * d));
    Plan p = inverse ? fftwf_plan_many_dft_c2r(1, &length, d, spectrum, nullptr, d, 1, real,
                                               nullptr, d, 1, FFTW_ESTIMATE)
                     : fftwf_plan_many_dft_r2c(1, &length, d, real, nullptr, d, 1, spectrum,
                                               nullptr, d, 1, FFTW_ESTIMATE);
    free(real);
    free(spectrum);
    return p;
  }
  static void exec_dft(Plan p, Complex* in, Complex* out) { fftwf_execute_dft(p, in, out); }
  static void exec_r2c(Plan p, float* in, Complex* out) { fftwf_execute_dft_r2c(p, in, out); }
  static void exec_c2r(Plan p, Complex* in, float* out) { fftwf_execute_dft_c2r(p, in, out); }
  static int alignment_of(const float* p) { return fftwf_alignment_of(const_cast<float*>(p)); }
  static void destroy(Plan p) { fftwf_destroy_plan(p); }
  static void cleanup() { fftwf_cleanup(); }
};

// The plans of one precision, made on first use and destroyed at exit. FFTW's planner is not
// thread-safe (execution with a finished plan is), so making a plan holds the cache's lock. The
// destructor runs at static destruction, after every parallel kernel has returned: it destroys
// each plan and then lets FFTW free its planner's own tables, so nothing FFTW allocated outlives
// the process's static objects (LeakSanitizer checks exactly that).
template <typename T>
class PlanCache {
 public:
  using Plan = typename Fftw<T>::Plan;

  static PlanCache& instance() {
    static PlanCache cache;
    return cache;
  }

  // kind 'c': 1-D complex DFT of length n, third argument the sign; kind 'r': 2-D real-to-complex
  // of n x d, third argument d; kind '1': 1-D real-to-complex of length n (third argument 0);
  // kinds 'f' and 'b': real-to-complex and back along the n rows of an [n, d] block, third
  // argument d.
  Plan get(char kind, int n, int d_or_sign) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::make_tuple(kind, n, d_or_sign);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    Plan plan = kind == 'c'   ? Fftw<T>::plan_1d(n, d_or_sign)
                : kind == 'r' ? Fftw<T>::plan_r2c_2d(n, d_or_sign)
                : kind == 'f' ? Fftw<T>::plan_columns(n, d_or_sign, false)
                : kind == 'b' ? Fftw<T>::plan_columns(n, d_or_sign, true)
                              : Fftw<T>::plan_r2c_1d(n);
    plans_.emplace(key, plan);
    return plan;
  }

  ~PlanCache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, plan] : plans_) Fftw<T>::destroy(plan);
    plans_.clear();
    Fftw<T>::cleanup();
  }

 private:
  PlanCache() = default;
  std::mutex mutex_;
  std::map<std::tuple<char, int, int>, Plan> plans_;
};

template <typename T>
typename Fftw<T>::Plan cached_plan(char kind, int n, int d_or_sign) {
  return PlanCache<T>::instance().get(kind, n, d_or_sign);
}

// The first h = n/2 + 1 rows of C and of S, C[j][m] = cos(2πjm/n) and S[j][m] = sin(2πjm/n):
// [C_h; S_h], 2h x n row-major. Row n - j of C is row j, of S row j negated, so these rows give
// the whole token-axis transform. Computed in double from jm mod n, the sines where 2jm ≡ 0
// (mod n) exactly 0 (the angle is 0 or π); made once per (precision, n) and kept.
template <typename T>
const T* token_dft_rows(int64_t n) {
  static std::mutex mutex;
  static std::map<int64_t, std::vector<T>> matrices;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = matrices.try_emplace(n);
  if (fresh) {
    const int64_t h = n / 2 + 1;
    it->second.resize(2 * h * n);
    for (int64_t j = 0; j < h; ++j)
      for (int64_t m = 0; m < n; ++m) {
        const int64_t jm = (j * m) % n;
        const double angle = 2 * M_PI * static_cast<double>(jm) / static_cast<double>(n);
        it->second[j * n + m] = static_cast<T>(std::cos(angle));
        it->second[(h + j) * n + m] = (2 * jm) % n == 0 ? T(0) : static_cast<T>(std::sin(angle));
      }
  }
  return it->second.data();  // std::map never moves its values
}

template <typename T>
struct Scratch {
  explicit Scratch(size_t bytes) : p(Fftw<T>::alloc(std::max<size_t>(bytes, 16))) {}
  ~Scratch() { Fftw<T>::free(p); }
  void* p;
};

}  // namespace

void CpuBackend::fft(const View& x, const View& y, int64_t outer, int64_t n, int64_t inner,
                     bool inverse) {
  dispatch_floating(x.dtype, "fft", [&](auto tag) {
    using T = decltype(tag);
    using C = typename Fftw<T>::Complex;
    auto plan = cached_plan<T>('c', static_cast<int>(n), inverse ? FFTW_BACKWARD : FFTW_FORWARD);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    parallel_for(outer * inner, 8, [&](int64_t b, int64_t e) {
      Scratch<T> a(sizeof(C) * n), z(sizeof(C) * n);
      C* ca = static_cast<C*>(a.p);
      C* cz = static_cast<C*>(z.p);
      for (int64_t col = b; col < e; ++col) {
        int64_t r = col / inner, c = col % inner;
        for (int64_t j = 0; j < n; ++j) {
          const T* src = in + ((r * n + j) * inner + c) * 2;
          ca[j][0] = src[0];
          ca[j][1] = src[1];
        }
        Fftw<T>::exec_dft(plan, ca, cz);
        for (int64_t j = 0; j < n; ++j) {
          T* dst = out + ((r * n + j) * inner + c) * 2;
          dst[0] = cz[j][0];
          dst[1] = cz[j][1];
        }
      }
    });
  });
}

namespace {

// fft2_real's two-step path (fft2_real_group) does the token axis as two products: about n
// multiply-adds per output where FFTW's length-n transform needs O(log n), but at the
// products' speed, and FFTW's rows run its SIMD codelets. On one thread of an AMD EPYC (Zen 3,
// AVX2), d = 128, the two steps take 0.35-0.9x the time of FFTW's 2-D plan up to 96 tokens
// (0.35x at 49) and 1.0-1.1x from 100 on; so longer token axes keep FFTW's 2-D plan.
constexpr int64_t kMaxProductTokens = 96;

// Items per group of the two-step path: up to 32K spectrum values (about 128 KiB in float32,
// in L2 with the product's output), the group count a multiple of 4 so that 2 or 4 threads get
// equal shares. It depends on the shape alone, so every number is the same for any thread count.
int64_t items_per_group(int64_t batch, int64_t n, int64_t half) {
  int64_t most = std::clamp<int64_t>(32768 / (n * half), 1, 16);
  int64_t groups = (batch + most - 1) / most;
  if (batch >= 4) groups = (groups + 3) / 4 * 4;
  return (batch + groups - 1) / groups;
}

// One item of `len` real rows of d (len ≤ n; rows len..n-1 of dst become zero) through FFTW's
// 2-D real-to-complex plan: the general path, for padded items and long token axes.
template <typename T>
void fft2_real_item(const T* src, T* dst, int64_t len, int64_t n, int64_t d, T* rin,
                    typename Fftw<T>::Complex* spectrum) {
  const int64_t half = d / 2 + 1;
  for (int64_t i = len * d; i < n * d; ++i) dst[i] = 0;
  if (len == 0) return;
  auto plan = cached_plan<T>('r', static_cast<int>(len), static_cast<int>(d));
  for (int64_t i = 0; i < len * d; ++i) rin[i] = src[i];
  Fftw<T>::exec_r2c(plan, rin, spectrum);
  // r2c keeps columns 0..d/2; the rest follow from Hermitian symmetry:
  // Y[j,k] = conj(Y[(len-j) % len, d-k]), whose real part is the same.
  for (int64_t j = 0; j < len; ++j) {
    for (int64_t k = 0; k < half; ++k) dst[j * d + k] = spectrum[j * half + k][0];
    int64_t jm = (len - j) % len;
    for (int64_t k = half; k < d; ++k) dst[j * d + k] = spectrum[jm * half + (d - k)][0];
  }
}

// Scratch of one thread's share of fft2_real.
template <typename T>
struct Fft2Scratch {
  Fft2Scratch(int64_t group, int64_t n, int64_t d)
      : input(sizeof(T) * n * d),  // one item (fft2_real_item) or one misaligned row
        spectrum(sizeof(T) * 2 * group * n * (d / 2 + 1)),
        product(sizeof(T) * 2 * group * (n / 2 + 1) * (d / 2 + 1)) {}
  Scratch<T> input, spectrum, product;
};

// `group` whole items (n real rows of d each) in two steps.
// 1. FFTW transforms every row alone (a 1-D plan executed per row: FFTW_ESTIMATE's plan for one
//    row uses its SIMD codelets, its plan for many rows at once did not), and the row's spectrum
//    is split into re[m][item][k] and im[m][item][k], k ≤ d/2: the n × (group·(d/2+1)) matrices
//    Re and Im of every item side by side.
// 2. The token axis is two products with h = n/2 + 1 rows each, P = C_h Re and Q = S_h Im, and
//    the real part of the 2-D transform is P_j + Q_j at row j < h and P_j − Q_j at row n − j:
//    half the arithmetic of [C | S] [Re; Im]. Columns past d/2 follow by Hermitian symmetry:
//    Y[r, k] = Y[(n − r) % n, d − k].
template <typename T>
void fft2_real_group(const T* in, T* out, int64_t group, int64_t n, int64_t d,
                     Fft2Scratch<T>& scratch) {
  using C = typename Fftw<T>::Complex;
  const int64_t half = d / 2 + 1, width = group * half, h = n / 2 + 1;
  auto plan = cached_plan<T>('1', static_cast<int>(d), 0);
  T* re = static_cast<T*>(scratch.spectrum.p);
  T* im = re + n * width;
  T* row_in = static_cast<T*>(scratch.input.p);
  C* row_out = reinterpret_cast<C*>(static_cast<T*>(scratch.product.p));
  for (int64_t item = 0; item < group; ++item)
    for (int64_t m = 0; m < n; ++m) {
      const T* src = in + (item * n + m) * d;
      // New-array execution needs the plan's alignment (that of fftw_malloc's arrays); r2c out
      // of place leaves its input as it was.
      if (Fftw<T>::alignment_of(src) != 0) src = std::copy(src, src + d, row_in) - d;
      Fftw<T>::exec_r2c(plan, const_cast<T*>(src), row_out);
      T* r = re + m * width + item * half;
      T* i = im + m * width + item * half;
      for (int64_t k = 0; k < half; ++k) {
        r[k] = row_out[k][0];
        i[k] = row_out[k][1];
      }
    }
  const T* rows = token_dft_rows<T>(n);
  T* p = static_cast<T*>(scratch.product.p);  // the row spectra are done with
  T* q = p + h * width;
  cpu::gemm_rows(false, false, h, width, n, 1.0, rows, n, re, width, 0.0, p, width);
  cpu::gemm_rows(false, false, h, width, n, 1.0, rows + h * n, n, im, width, 0.0, q, width);
  for (int64_t item = 0; item < group; ++item)
    for (int64_t r = 0; r < n; ++r) {
      T* dst = out + (item * n + r) * d;
      const int64_t j = std::min(r, n - r), mirror = (n - r) % n;  // j < h
      const T* pj = p + j * width + item * half;
      const T* qj = q + j * width + item * half;
      const T sign = r < h ? T(1) : T(-1), mirror_sign = mirror < h ? T(1) : T(-1);
      for (int64_t k = 0; k < half; ++k) dst[k] = pj[k] + sign * qj[k];
      for (int64_t k = half; k < d; ++k) dst[k] = pj[d - k] + mirror_sign * qj[d - k];
    }
}

}  // namespace

void CpuBackend::fft2_real(const View& x, const View& lengths, const View& y, int64_t batch,
                           int64_t n, int64_t d) {
  dispatch_floating(x.dtype, "fft2_real", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    const int32_t* lens = lengths.as<int32_t>();
    auto length = [&](int64_t item) {
      return lens ? std::min<int64_t>(n, std::max<int64_t>(0, lens[item])) : n;
    };
    const int64_t group = n <= kMaxProductTokens ? items_per_group(batch, n, d / 2 + 1) : 1;
    const int64_t groups = (batch + group - 1) / group;
    parallel_for(groups, 1, [&](int64_t b, int64_t e) {
      Fft2Scratch<T> scratch(group, n, d);
      for (int64_t g = b; g < e; ++g) {
        const int64_t first = g * group, count = std::min(group, batch - first);
        bool whole = n <= kMaxProductTokens;
        for (int64_t item = first; whole && item < first + count; ++item) whole = length(item) == n;
        if (whole) {
          fft2_real_group(in + first * n * d, out + first * n * d, count, n, d, scratch);
          continue;
        }
        for (int64_t item = first; item < first + count; ++item)
          fft2_real_item(in + item * n * d, out + item * n * d, length(item), n, d,
                         static_cast<T*>(scratch.input.p),
                         static_cast<typename Fftw<T>::Complex*>(scratch.spectrum.p));
      }
    });
  });
}

namespace {

// The circular convolution's transforms: every channel of a [length, d] block along its rows.
// A block of n < length rows enters zero-padded; spectra are [length / 2 + 1, d] complex.
template <typename T>
struct ColumnSpectra {
  using C = typename Fftw<T>::Complex;
  ColumnSpectra(int64_t length, int64_t d)
      : length(length),
        d(d),
        half(length / 2 + 1),
        forward(cached_plan<T>('f', static_cast<int>(length), static_cast<int>(d))),
        inverse(cached_plan<T>('b', static_cast<int>(length), static_cast<int>(d))) {}

  // The spectrum of `rows` rows of src (contiguous, rows ≤ length) padded with zeros.
  void transform(const T* src, int64_t rows, T* real, C* spectrum) const {
    std::copy(src, src + rows * d, real);
    std::fill(real + rows * d, real + length * d, T(0));
    Fftw<T>::exec_r2c(forward, real, spectrum);
  }
  // The first `rows` rows of the inverse transform of `spectrum` (overwritten), divided by
  // length (FFTW's transforms are unnormalised), into dst.
  void invert(C* spectrum, int64_t rows, T* real, T* dst) const {
    Fftw<T>::exec_c2r(inverse, spectrum, real);
    const T scale = static_cast<T>(1.0 / static_cast<double>(length));
    for (int64_t i = 0; i < rows * d; ++i) dst[i] = real[i] * scale;
  }

  int64_t length, d, half;
  typename Fftw<T>::Plan forward, inverse;
};

// One thread's buffers for ColumnSpectra: a real block and two spectra.
template <typename T>
struct ColumnScratch {
  using C = typename Fftw<T>::Complex;
  explicit ColumnScratch(const ColumnSpectra<T>& s)
      : real(sizeof(T) * s.length * s.d),
        a(sizeof(C) * s.half * s.d),
        b(sizeof(C) * s.half * s.d) {}
  T* block() const { return static_cast<T*>(real.p); }
  C* first() const { return static_cast<C*>(a.p); }
  C* second() const { return static_cast<C*>(b.p); }
  Scratch<T> real, a, b;
};

}  // namespace

// The convolution theorem: DFT(k ⊛ x) = DFT(k) ⊙ DFT(x) for the circular convolution of length
// L, so each item is y = IDFT(K ⊙ X) / L with X the spectrum of its n rows padded to L (real
// transforms: half spectra). Items are independent: one per task of the worker pool.
void CpuBackend::circular_conv(const View& x, const View& k, const View& y, int64_t batch,
                               int64_t n, int64_t d, int64_t length) {
  dispatch_floating(x.dtype, "circular_conv", [&](auto tag) {
    using T = decltype(tag);
    using C = typename Fftw<T>::Complex;
    const ColumnSpectra<T> spectra(length, d);
    const ColumnScratch<T> kernel(spectra);
    spectra.transform(k.as<T>(), length, kernel.block(), kernel.first());
    const C* kf = kernel.first();
    const T* in = x.as<T>();
    T* out = y.as<T>();
    parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      const ColumnScratch<T> s(spectra);
      for (int64_t b = b0; b < b1; ++b) {
        C* xf = s.first();
        spectra.transform(in + b * n * d, n, s.block(), xf);
        for (int64_t f = 0; f < spectra.half * d; ++f) {
          const T re = xf[f][0] * kf[f][0] - xf[f][1] * kf[f][1];
          const T im = xf[f][0] * kf[f][1] + xf[f][1] * kf[f][0];
          xf[f][0] = re, xf[f][1] = im;
        }
        spectra.invert(xf, n, s.block(), out + b * n * d);
      }
    });
  });
}

// The adjoints are correlations, products with conjugate spectra: DX = conj(K) ⊙ DY and
// DK = Σ_b DY_b ⊙ conj(X_b). Each item's DY_b ⊙ conj(X_b) is kept, and the sum over the batch
// runs per frequency in item order: the same bits for every thread count.
void CpuBackend::circular_conv_backward(const View& x, const View& k, const View& dy,
                                        const View& dx, const View& dk, int64_t batch, int64_t n,
                                        int64_t d, int64_t length) {
  dispatch_floating(x.dtype, "circular_conv_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = typename Fftw<T>::Complex;
    const ColumnSpectra<T> spectra(length, d);
    const int64_t width = spectra.half * d;
    const ColumnScratch<T> kernel(spectra);
    spectra.transform(k.as<T>(), length, kernel.block(), kernel.first());
    const C* kf = kernel.first();
    std::vector<T> products(static_cast<size_t>(2 * batch * width));
    parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      const ColumnScratch<T> s(spectra);
      for (int64_t b = b0; b < b1; ++b) {
        C *gf = s.first(), *xf = s.second();
        spectra.transform(dy.as<T>() + b * n * d, n, s.block(), gf);
        spectra.transform(x.as<T>() + b * n * d, n, s.block(), xf);
        T* p = products.data() + 2 * b * width;
        for (int64_t f = 0; f < width; ++f) {
          const T gr = gf[f][0], gi = gf[f][1], xr = xf[f][0], xi = xf[f][1];
          p[2 * f] = gr * xr + gi * xi;  // dy · conj(x)
          p[2 * f + 1] = gi * xr - gr * xi;
          gf[f][0] = kf[f][0] * gr + kf[f][1] * gi;  // conj(k) · dy
          gf[f][1] = kf[f][0] * gi - kf[f][1] * gr;
        }
        spectra.invert(gf, n, s.block(), dx.as<T>() + b * n * d);
      }
    });
    C* sum = kernel.second();
    parallel_for(width, 256, [&](int64_t f0, int64_t f1) {
      for (int64_t f = f0; f < f1; ++f) {
        T re = 0, im = 0;
        for (int64_t b = 0; b < batch; ++b) {
          re += products[2 * (b * width + f)];
          im += products[2 * (b * width + f) + 1];
        }
        sum[f][0] = re, sum[f][1] = im;
      }
    });
    spectra.invert(sum, length, kernel.block(), dk.as<T>());
  });
}

}  // namespace mixlab
