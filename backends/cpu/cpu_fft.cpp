// Fourier transforms on FFTW. Plans are made once per (precision, kind, size) with
// FFTW_ESTIMATE (deterministic: FFTW_MEASURE may pick different algorithms run to run) and
// reused through FFTW's new-array execute on aligned scratch buffers.
#include <fftw3.h>

#include <map>
#include <mutex>
#include <tuple>

#include "backends/cpu/cpu_backend.h"
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
  static void exec_dft(Plan p, Complex* in, Complex* out) { fftw_execute_dft(p, in, out); }
  static void exec_r2c(Plan p, double* in, Complex* out) { fftw_execute_dft_r2c(p, in, out); }
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
  static void exec_dft(Plan p, Complex* in, Complex* out) { fftwf_execute_dft(p, in, out); }
  static void exec_r2c(Plan p, float* in, Complex* out) { fftwf_execute_dft_r2c(p, in, out); }
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
  // of n x d, third argument d.
  Plan get(char kind, int n, int d_or_sign) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::make_tuple(kind, n, d_or_sign);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    Plan plan = kind == 'c' ? Fftw<T>::plan_1d(n, d_or_sign) : Fftw<T>::plan_r2c_2d(n, d_or_sign);
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

void CpuBackend::fft2_real(const View& x, const View& lengths, const View& y, int64_t batch,
                           int64_t n, int64_t d) {
  dispatch_floating(x.dtype, "fft2_real", [&](auto tag) {
    using T = decltype(tag);
    using C = typename Fftw<T>::Complex;
    const T* in = x.as<T>();
    T* out = y.as<T>();
    const int32_t* lens = lengths.as<int32_t>();
    int64_t half = d / 2 + 1;
    parallel_for(batch, 1, [&](int64_t b, int64_t e) {
      Scratch<T> real(sizeof(T) * n * d), spec(sizeof(C) * n * half);
      T* rin = static_cast<T*>(real.p);
      C* cs = static_cast<C*>(spec.p);
      for (int64_t item = b; item < e; ++item) {
        int64_t len = lens ? std::min<int64_t>(n, std::max<int64_t>(0, lens[item])) : n;
        T* dst = out + item * n * d;
        for (int64_t i = len * d; i < n * d; ++i) dst[i] = 0;
        if (len == 0) continue;
        auto plan = cached_plan<T>('r', static_cast<int>(len), static_cast<int>(d));
        const T* src = in + item * n * d;
        for (int64_t i = 0; i < len * d; ++i) rin[i] = src[i];
        Fftw<T>::exec_r2c(plan, rin, cs);
        // r2c keeps columns 0..d/2; the rest follow from Hermitian symmetry:
        // Y[j,k] = conj(Y[(len-j) % len, d-k]), whose real part is the same.
        for (int64_t j = 0; j < len; ++j) {
          for (int64_t k = 0; k < half; ++k) dst[j * d + k] = cs[j * half + k][0];
          int64_t jm = (len - j) % len;
          for (int64_t k = half; k < d; ++k) dst[j * d + k] = cs[jm * half + (d - k)][0];
        }
      }
    });
  });
}

}  // namespace mixlab
