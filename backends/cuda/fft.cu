// Fourier transforms on cuFFT. Reference: backends/cpu/cpu_fft.cpp.
//
// fft: the complex DFT along n of [outer, n, inner, 2] is one strided batched C2C/Z2Z plan when
// outer or inner is 1, otherwise one plan looped over the smaller of the two. Length 1 is the
// identity (a copy). cuFFT's out-of-place C2C and R2C keep their input intact.
//
// fft2_real: Re(DFT2) of each [len, d] item, rows >= len zero. With every item at full length n
// it is one batched 2-D R2C plan. With per-item lengths it is two passes: a batched R2C along d
// over all rows (one plan), then an in-place C2C along the first len rows of each item (a plan
// per distinct length, looped over items). Both leave the half spectrum [batch, n, d/2 + 1] in
// scratch; one kernel then writes y, filling columns past d/2 from Hermitian symmetry
// (Y[j, k] = conj(Y[(len - j) % len, d - k]), same real part) and zeroing rows >= len.
//
// circular_conv and its backward: each channel's signal is laid out contiguous and padded to the
// length L (pad_channels_kernel), transformed by one batched R2C plan, multiplied by the
// kernel's half spectrum (conjugated for the backward's correlations) and brought back by one
// batched C2R plan; the batch sum of the kernel's gradient runs per frequency in item order.
// The backward transforms the kernel again instead of keeping the forward's spectrum, as the
// CPU backend does: d of its 2B·d + d transforms, and nothing held between the two passes.
#include <cuComplex.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cuda/common.cuh"
#include "backends/cuda/fft_plans.h"

namespace mixlab {
namespace cuda {
namespace {

template <typename T>
struct CufftTypes;
template <>
struct CufftTypes<float> {
  using Complex = cufftComplex;
  using Real = cufftReal;
  static constexpr cufftType c2c = CUFFT_C2C;
  static constexpr cufftType r2c = CUFFT_R2C;
  static constexpr cufftType c2r = CUFFT_C2R;
  static cufftResult exec_c2c(cufftHandle h, Complex* in, Complex* out, int dir) {
    return cufftExecC2C(h, in, out, dir);
  }
  static cufftResult exec_r2c(cufftHandle h, Real* in, Complex* out) {
    return cufftExecR2C(h, in, out);
  }
  static cufftResult exec_c2r(cufftHandle h, Complex* in, Real* out) {
    return cufftExecC2R(h, in, out);
  }
};
template <>
struct CufftTypes<double> {
  using Complex = cufftDoubleComplex;
  using Real = cufftDoubleReal;
  static constexpr cufftType c2c = CUFFT_Z2Z;
  static constexpr cufftType r2c = CUFFT_D2Z;
  static constexpr cufftType c2r = CUFFT_Z2D;
  static cufftResult exec_c2c(cufftHandle h, Complex* in, Complex* out, int dir) {
    return cufftExecZ2Z(h, in, out, dir);
  }
  static cufftResult exec_r2c(cufftHandle h, Real* in, Complex* out) {
    return cufftExecD2Z(h, in, out);
  }
  static cufftResult exec_c2r(cufftHandle h, Complex* in, Real* out) {
    return cufftExecZ2D(h, in, out);
  }
};

// A strided batch of 1-D complex transforms of length n (all counts in complex elements).
FftGeometry c2c_geometry(cufftType type, long long n, long long stride, long long dist,
                         long long batch) {
  FftGeometry g{};
  g.type = type;
  g.rank = 1;
  g.n[0] = n;
  g.inembed[0] = g.onembed[0] = n;
  g.istride = g.ostride = stride;
  g.idist = g.odist = dist;
  g.batch = batch;
  return g;
}

template <typename T>
__global__ void real_to_complex_kernel(const T* x, T* spec, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    spec[2 * i] = x[i];
    spec[2 * i + 1] = T(0);
  }
}

// y[b, j, k] from the half spectrum spec [batch, n, half] (interleaved complex).
template <typename T>
__global__ void expand_real_kernel(const T* spec, const int32_t* lengths, T* y, int64_t batch,
                                   int64_t n, int64_t d) {
  int64_t half = d / 2 + 1;
  int64_t total = batch * n * d;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t k = e % d;
    int64_t j = (e / d) % n;
    int64_t b = e / (n * d);
    int64_t len = n;
    if (lengths) {
      len = lengths[b];
      len = len < 0 ? 0 : (len > n ? n : len);
    }
    T v = 0;
    if (j < len) {
      const T* item = spec + b * n * half * 2;
      if (k < half)
        v = item[(j * half + k) * 2];
      else
        v = item[(((len - j) % len) * half + (d - k)) * 2];
    }
    y[e] = v;
  }
}

// `rows` real transforms of length L, each row contiguous: real [rows, L] to half spectra
// [rows, L/2 + 1] (R2C, D2Z) or back (C2R, Z2D).
FftGeometry real_geometry(cufftType type, long long length, long long rows) {
  const long long half = length / 2 + 1;
  const bool to_spectrum = type == CUFFT_R2C || type == CUFFT_D2Z;
  FftGeometry g{};
  g.type = type;
  g.rank = 1;
  g.n[0] = length;
  g.inembed[0] = g.idist = to_spectrum ? length : half;
  g.onembed[0] = g.odist = to_spectrum ? half : length;
  g.istride = g.ostride = 1;
  g.batch = rows;
  return g;
}

// Runs `exec` on the plan of `geo` with a work area borrowed from the backend. Call with the
// plan cache's mutex held.
template <typename Exec>
void run_plan(CudaBackend& backend, FftPlanCache& plans, cudaStream_t stream,
              const FftGeometry& geo, Exec&& exec) {
  FftPlan plan = plans.get(geo, stream);
  Scratch work(backend, plan.work_bytes);
  if (plan.work_bytes) MIXLAB_CUFFT_CHECK(cufftSetWorkArea(plan.handle, work.get()));
  exec(plan.handle);
}

// dst[(b·d + c)·L + i] = src[(b·n + i)·d + c] for i < n, else 0: each channel's signal padded to
// L and contiguous, as the batched transforms read it.
template <typename T>
__global__ void pad_channels_kernel(const T* src, T* dst, int64_t batch, int64_t n, int64_t d,
                                    int64_t length) {
  int64_t total = batch * d * length;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t i = e % length, c = (e / length) % d, b = e / (length * d);
    dst[e] = i < n ? src[(b * n + i) * d + c] : T(0);
  }
}

// dst[(b·n + i)·d + c] = src[(b·d + c)·L + i] · scale for i < n.
template <typename T>
__global__ void unpad_channels_kernel(const T* src, T* dst, int64_t batch, int64_t n, int64_t d,
                                      int64_t length, T scale) {
  int64_t total = batch * n * d;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t c = e % d, i = (e / d) % n, b = e / (n * d);
    dst[e] = src[(b * d + c) * length + i] * scale;
  }
}

// spec[r, f] ← spec[r, f] · k[r mod d, f], or · conj(k[r mod d, f]), over rows r = b·d + c of
// half spectra (interleaved complex).
template <typename T>
__global__ void multiply_spectra_kernel(T* spec, const T* k, int64_t rows, int64_t d, int64_t half,
                                        bool conjugate) {
  int64_t total = rows * half;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* kf = k + 2 * (((e / half) % d) * half + e % half);
    T a = spec[2 * e], b = spec[2 * e + 1], kr = kf[0], ki = conjugate ? -kf[1] : kf[1];
    spec[2 * e] = a * kr - b * ki;
    spec[2 * e + 1] = a * ki + b * kr;
  }
}

// out[c, f] = Σ_b g[b·d + c, f] · conj(x[b·d + c, f]), the batch summed in order.
template <typename T>
__global__ void correlate_spectra_kernel(const T* g, const T* x, T* out, int64_t batch, int64_t d,
                                         int64_t half) {
  int64_t total = d * half;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T re = 0, im = 0;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t at = 2 * (b * d * half + e);  // row b·d + c, column f of [rows, half]
      re += g[at] * x[at] + g[at + 1] * x[at + 1];
      im += g[at + 1] * x[at] - g[at] * x[at + 1];
    }
    out[2 * e] = re;
    out[2 * e + 1] = im;
  }
}

bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::fft(const View& x, const View& y, int64_t outer, int64_t n, int64_t inner,
                      bool inverse) {
  int64_t count = outer * n * inner;
  if (count == 0) return;
  activate();
  dispatch_floating(x.dtype, "fft", [&](auto tag) {
    using T = decltype(tag);
    using F = CufftTypes<T>;
    using C = typename F::Complex;
    size_t bytes = sizeof(C) * count;
    if (n == 1) {  // a length-1 DFT is the identity
      MIXLAB_CUDA_CHECK(cudaMemcpyAsync(y.data, x.data, bytes, cudaMemcpyDeviceToDevice, stream_));
      return;
    }
    // cuFFT reads complex elements: a view starting between two of them gets an aligned copy.
    Scratch staged(*this, aligned_to(x.data, sizeof(C)) ? 0 : bytes);
    C* in = static_cast<C*>(x.data);
    if (staged.get()) {
      MIXLAB_CUDA_CHECK(
          cudaMemcpyAsync(staged.get(), x.data, bytes, cudaMemcpyDeviceToDevice, stream_));
      in = staged.as<C>();
    }
    C* out = static_cast<C*>(y.data);
    int dir = inverse ? CUFFT_INVERSE : CUFFT_FORWARD;
    FftGeometry geo;
    int64_t loops = 1, step = 0;
    if (inner == 1) {
      geo = c2c_geometry(F::c2c, n, 1, n, outer);
    } else if (outer == 1) {
      geo = c2c_geometry(F::c2c, n, inner, 1, inner);
    } else if (outer <= inner) {
      geo = c2c_geometry(F::c2c, n, inner, 1, inner);
      loops = outer, step = n * inner;
    } else {
      geo = c2c_geometry(F::c2c, n, inner, n * inner, outer);
      loops = inner, step = 1;
    }
    std::lock_guard<std::mutex> lock(fft_plans_->mutex);
    FftPlan plan = fft_plans_->get(geo, stream_);
    Scratch work(*this, plan.work_bytes);
    if (plan.work_bytes) MIXLAB_CUFFT_CHECK(cufftSetWorkArea(plan.handle, work.get()));
    for (int64_t i = 0; i < loops; ++i)
      MIXLAB_CUFFT_CHECK(F::exec_c2c(plan.handle, in + i * step, out + i * step, dir));
  });
  check_launch("fft");
}

void CudaBackend::fft2_real(const View& x, const View& lengths, const View& y, int64_t batch,
                            int64_t n, int64_t d) {
  int64_t total = batch * n * d;
  if (total == 0) return;
  activate();
  // The per-item lengths on the host choose the plans (a small synchronous read).
  std::vector<int32_t> lens;
  bool uniform = true;
  if (lengths.data) {
    lens.resize(batch);
    copy_to_host(lens.data(), lengths.data, sizeof(int32_t) * batch);
    for (int32_t& l : lens) {
      l = static_cast<int32_t>(std::min<int64_t>(n, std::max<int64_t>(0, l)));
      uniform = uniform && l == n;
    }
  }
  dispatch_floating(x.dtype, "fft2_real", [&](auto tag) {
    using T = decltype(tag);
    using F = CufftTypes<T>;
    using C = typename F::Complex;
    int64_t half = d / 2 + 1;
    Scratch spec(*this, sizeof(C) * batch * n * half);
    Scratch staged(*this, aligned_to(x.data, sizeof(C)) ? 0 : sizeof(T) * total);
    T* in = static_cast<T*>(x.data);
    if (staged.get()) {
      MIXLAB_CUDA_CHECK(cudaMemcpyAsync(staged.get(), x.data, sizeof(T) * total,
                                        cudaMemcpyDeviceToDevice, stream_));
      in = staged.as<T>();
    }
    C* sp = spec.as<C>();
    std::lock_guard<std::mutex> lock(fft_plans_->mutex);
    auto run = [&](const FftGeometry& geo, auto&& exec) {
      FftPlan plan = fft_plans_->get(geo, stream_);
      Scratch work(*this, plan.work_bytes);
      if (plan.work_bytes) MIXLAB_CUFFT_CHECK(cufftSetWorkArea(plan.handle, work.get()));
      exec(plan.handle);
    };
    if (uniform && n > 1 && d > 1) {
      FftGeometry geo{};
      geo.type = F::r2c;
      geo.rank = 2;
      geo.n[0] = n, geo.n[1] = d;
      geo.inembed[0] = n, geo.inembed[1] = d, geo.istride = 1, geo.idist = n * d;
      geo.onembed[0] = n, geo.onembed[1] = half, geo.ostride = 1, geo.odist = n * half;
      geo.batch = batch;
      run(geo, [&](cufftHandle h) { MIXLAB_CUFFT_CHECK(F::exec_r2c(h, in, sp)); });
    } else {
      // Pass 1: every row (valid or not) along d.
      if (d > 1) {
        FftGeometry geo{};
        geo.type = F::r2c;
        geo.rank = 1;
        geo.n[0] = d;
        geo.inembed[0] = d, geo.istride = 1, geo.idist = d;
        geo.onembed[0] = half, geo.ostride = 1, geo.odist = half;
        geo.batch = batch * n;
        run(geo, [&](cufftHandle h) { MIXLAB_CUFFT_CHECK(F::exec_r2c(h, in, sp)); });
      } else {
        real_to_complex_kernel<T>
            <<<grid_for(batch * n), kBlock, 0, stream_>>>(in, reinterpret_cast<T*>(sp), batch * n);
        check_launch("fft2_real");
      }
      // Pass 2: down the first len rows of each item, in place, every column of the half.
      for (int64_t b = 0; b < batch; ++b) {
        int64_t len = lens.empty() ? n : lens[b];
        if (len <= 1) continue;  // length 0 is zeroed below, length 1 is the identity
        FftGeometry geo = c2c_geometry(F::c2c, len, half, 1, half);
        C* item = sp + b * n * half;
        run(geo,
            [&](cufftHandle h) { MIXLAB_CUFFT_CHECK(F::exec_c2c(h, item, item, CUFFT_FORWARD)); });
      }
    }
    expand_real_kernel<T><<<grid_for(total), kBlock, 0, stream_>>>(
        reinterpret_cast<const T*>(sp), lengths.as<int32_t>(), y.as<T>(), batch, n, d);
  });
  check_launch("fft2_real");
}

void CudaBackend::circular_conv(const View& x, const View& k, const View& y, int64_t batch,
                                int64_t n, int64_t d, int64_t rows_of_k) {
  if (batch * n * d == 0) return;
  activate();
  // A one-row kernel (n = 1) is transformed at length 2, which wraps nothing: like fft() above,
  // this keeps length 1 away from cuFFT.
  const int64_t length = std::max<int64_t>(rows_of_k, 2);
  dispatch_floating(x.dtype, "circular_conv", [&](auto tag) {
    using T = decltype(tag);
    using F = CufftTypes<T>;
    using C = typename F::Complex;
    const int64_t half = length / 2 + 1, rows = batch * d;
    Scratch kreal(*this, sizeof(T) * d * length), kspec(*this, sizeof(C) * d * half);
    Scratch real(*this, sizeof(T) * rows * length), spec(*this, sizeof(C) * rows * half);
    pad_channels_kernel<T><<<grid_for(d * length), kBlock, 0, stream_>>>(k.as<T>(), kreal.as<T>(),
                                                                         1, rows_of_k, d, length);
    pad_channels_kernel<T><<<grid_for(rows * length), kBlock, 0, stream_>>>(x.as<T>(), real.as<T>(),
                                                                            batch, n, d, length);
    std::lock_guard<std::mutex> lock(fft_plans_->mutex);
    run_plan(*this, *fft_plans_, stream_, real_geometry(F::r2c, length, d), [&](cufftHandle h) {
      MIXLAB_CUFFT_CHECK(F::exec_r2c(h, kreal.as<T>(), kspec.as<C>()));
    });
    run_plan(*this, *fft_plans_, stream_, real_geometry(F::r2c, length, rows), [&](cufftHandle h) {
      MIXLAB_CUFFT_CHECK(F::exec_r2c(h, real.as<T>(), spec.as<C>()));
    });
    multiply_spectra_kernel<T><<<grid_for(rows * half), kBlock, 0, stream_>>>(
        spec.as<T>(), kspec.as<T>(), rows, d, half, false);
    run_plan(*this, *fft_plans_, stream_, real_geometry(F::c2r, length, rows), [&](cufftHandle h) {
      MIXLAB_CUFFT_CHECK(F::exec_c2r(h, spec.as<C>(), real.as<T>()));
    });
    unpad_channels_kernel<T><<<grid_for(batch * n * d), kBlock, 0, stream_>>>(
        real.as<T>(), y.as<T>(), batch, n, d, length, static_cast<T>(1.0 / double(length)));
  });
  check_launch("circular_conv");
}

void CudaBackend::circular_conv_backward(const View& x, const View& k, const View& dy,
                                         const View& dx, const View& dk, int64_t batch, int64_t n,
                                         int64_t d, int64_t rows_of_k) {
  if (batch * n * d == 0) return;
  activate();
  // A one-row kernel (n = 1) is transformed at length 2, which wraps nothing: like fft() above,
  // this keeps length 1 away from cuFFT.
  const int64_t length = std::max<int64_t>(rows_of_k, 2);
  dispatch_floating(x.dtype, "circular_conv_backward", [&](auto tag) {
    using T = decltype(tag);
    using F = CufftTypes<T>;
    using C = typename F::Complex;
    const int64_t half = length / 2 + 1, rows = batch * d;
    Scratch kreal(*this, sizeof(T) * d * length), kspec(*this, sizeof(C) * d * half);
    Scratch dkspec(*this, sizeof(C) * d * half);
    Scratch greal(*this, sizeof(T) * rows * length), gspec(*this, sizeof(C) * rows * half);
    Scratch xreal(*this, sizeof(T) * rows * length), xspec(*this, sizeof(C) * rows * half);
    pad_channels_kernel<T><<<grid_for(d * length), kBlock, 0, stream_>>>(k.as<T>(), kreal.as<T>(),
                                                                         1, rows_of_k, d, length);
    pad_channels_kernel<T><<<grid_for(rows * length), kBlock, 0, stream_>>>(
        dy.as<T>(), greal.as<T>(), batch, n, d, length);
    pad_channels_kernel<T><<<grid_for(rows * length), kBlock, 0, stream_>>>(
        x.as<T>(), xreal.as<T>(), batch, n, d, length);
    std::lock_guard<std::mutex> lock(fft_plans_->mutex);
    run_plan(*this, *fft_plans_, stream_, real_geometry(F::r2c, length, d), [&](cufftHandle h) {
      MIXLAB_CUFFT_CHECK(F::exec_r2c(h, kreal.as<T>(), kspec.as<C>()));
    });
    run_plan(*this, *fft_plans_, stream_, real_geometry(F::r2c, length, rows), [&](cufftHandle h) {
      MIXLAB_CUFFT_CHECK(F::exec_r2c(h, greal.as<T>(), gspec.as<C>()));
      MIXLAB_CUFFT_CHECK(F::exec_r2c(h, xreal.as<T>(), xspec.as<C>()));
    });
    correlate_spectra_kernel<T><<<grid_for(d * half), kBlock, 0, stream_>>>(
        gspec.as<T>(), xspec.as<T>(), dkspec.as<T>(), batch, d, half);
    multiply_spectra_kernel<T><<<grid_for(rows * half), kBlock, 0, stream_>>>(
        gspec.as<T>(), kspec.as<T>(), rows, d, half, true);
    run_plan(*this, *fft_plans_, stream_, real_geometry(F::c2r, length, rows), [&](cufftHandle h) {
      MIXLAB_CUFFT_CHECK(F::exec_c2r(h, gspec.as<C>(), greal.as<T>()));
    });
    run_plan(*this, *fft_plans_, stream_, real_geometry(F::c2r, length, d), [&](cufftHandle h) {
      MIXLAB_CUFFT_CHECK(F::exec_c2r(h, dkspec.as<C>(), kreal.as<T>()));
    });
    const T scale = static_cast<T>(1.0 / double(length));
    unpad_channels_kernel<T><<<grid_for(batch * n * d), kBlock, 0, stream_>>>(
        greal.as<T>(), dx.as<T>(), batch, n, d, length, scale);
    unpad_channels_kernel<T><<<grid_for(d * length), kBlock, 0, stream_>>>(
        kreal.as<T>(), dk.as<T>(), 1, rows_of_k, d, length, scale);
  });
  check_launch("circular_conv_backward");
}

}  // namespace mixlab
