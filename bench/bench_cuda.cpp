// The CUDA backend's speed, measured against what the hardware and cuBLAS allow:
//
//   gemm         the backend's gemm kernel and the public matmul op vs a raw
//                cublasSgemmStridedBatched on the same buffers and stream: TFLOP/s and the
//                ratio raw time / engine time (1.0 = no overhead);
//   row kernels  softmax, layer norm and cross-entropy (forward and backward) and a plain
//                elementwise add as achieved bandwidth (GB/s of compulsory traffic: each input
//                read once, each output written once) and as a fraction of the device's peak
//                (memory clock x bus width x 2, from cudaDeviceGetAttribute).
//
// Timing: CUDA events on the backend's stream, after a warm-up call, averaged over repeats.
// Without a GPU (or without the CUDA backend in this build) it says so and exits 0.
//
//   build/bench_cuda [--quick]
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/random.h"

#ifdef MIXLAB_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_backend.h"
#endif

using namespace mixlab;

#ifdef MIXLAB_HAVE_CUDA
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("bench_cuda: ", what, ": ", cudaGetErrorString(e));
}
void cublas_ok(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("bench_cuda: ", what, ": ", cublasGetStatusString(s));
}

// Average milliseconds per call of fn, queued `repeats` times on `stream`.
double time_ms(cudaStream_t stream, const std::function<void()>& fn, int repeats) {
  fn();  // warm-up: plans, handles, allocator cache
  cuda_ok(cudaStreamSynchronize(stream), "synchronize");
  cudaEvent_t start, stop;
  cuda_ok(cudaEventCreate(&start), "event");
  cuda_ok(cudaEventCreate(&stop), "event");
  cuda_ok(cudaEventRecord(start, stream), "record");
  for (int i = 0; i < repeats; ++i) fn();
  cuda_ok(cudaEventRecord(stop, stream), "record");
  cuda_ok(cudaEventSynchronize(stop), "event synchronize");
  float ms = 0;
  cuda_ok(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / repeats;
}

struct GemmCase {
  const char* name;
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
};

void bench_gemm(CudaBackend& backend, bool quick) {
  cudaStream_t stream = backend.stream();
  cublasHandle_t raw = nullptr;
  cublas_ok(cublasCreate(&raw), "cublasCreate");
  cublas_ok(cublasSetStream(raw, stream), "cublasSetStream");
  std::vector<GemmCase> cases = {
      {"square 1024", 1, 1024, 1024, 1024, false, false},
      {"square 2048", 1, 2048, 2048, 2048, false, false},
      {"square 4096", 1, 4096, 4096, 4096, false, false},
      {"linear x W^T 8192x1024x4096", 1, 8192, 4096, 1024, false, true},
      {"grad W = dY^T X 4096x1024x8192", 1, 4096, 1024, 8192, true, false},
      {"attention QK^T 64x(256x256x64)", 64, 256, 256, 64, false, true},
      {"attention PV 64x(256x64x256)", 64, 256, 64, 256, false, false},
  };
  if (quick) cases.resize(2);
  std::printf(
      "\nGEMM float32 (full FP32, no TF32): engine vs raw cuBLAS, same buffers and stream\n");
  std::printf(
      "(TFLOP/s of raw cuBLAS, of the backend's gemm kernel and of the matmul op; ratios are\n"
      " raw time / engine time: 1.0 = no overhead)\n");
  std::printf("%-34s %10s %10s %10s %8s %8s\n", "case", "raw", "kernel", "matmul", "kernel",
              "matmul");
  NoGradGuard no_grad;
  for (const GemmCase& c : cases) {
    Generator gen(1);
    Device dev = Device::cuda(backend.device());
    Shape sa = c.trans_a ? Shape{c.batch, c.k, c.m} : Shape{c.batch, c.m, c.k};
    Shape sb = c.trans_b ? Shape{c.batch, c.n, c.k} : Shape{c.batch, c.k, c.n};
    Tensor a = Tensor::uniform(sa, -1, 1, gen).to(dev);
    Tensor b = Tensor::uniform(sb, -1, 1, gen).to(dev);
    Tensor out = Tensor::empty({c.batch, c.m, c.n}, DType::F32, dev);
    GemmArgs g;
    g.dtype = DType::F32;
    g.trans_a = c.trans_a, g.trans_b = c.trans_b;
    g.m = c.m, g.n = c.n, g.k = c.k;
    g.a = a.raw_data(), g.lda = c.trans_a ? c.m : c.k, g.stride_a = c.m * c.k;
    g.b = b.raw_data(), g.ldb = c.trans_b ? c.k : c.n, g.stride_b = c.k * c.n;
    g.c = out.raw_data(), g.ldc = c.n, g.stride_c = c.m * c.n;
    g.batch = c.batch;
    float one = 1.0f, zero = 0.0f;
    int repeats = c.m * c.n * c.k * c.batch >= (int64_t(1) << 33) ? 10 : 50;
    double raw_ms = time_ms(
        stream,
        [&] {
          // Row-major through the column-major operand swap, as the backend does.
          cublas_ok(
              cublasSgemmStridedBatched(raw, c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, c.n, c.m, c.k, &one,
                                        static_cast<const float*>(g.b), g.ldb, g.stride_b,
                                        static_cast<const float*>(g.a), g.lda, g.stride_a, &zero,
                                        static_cast<float*>(g.c), g.ldc, g.stride_c, c.batch),
              "raw gemm");
        },
        repeats);
    double kernel_ms = time_ms(
        stream, [&] { backend.gemm(g); }, repeats);
    Tensor av = c.trans_a ? transpose(a, 1, 2) : a;
    Tensor bv = c.trans_b ? transpose(b, 1, 2) : b;
    double op_ms = time_ms(
        stream, [&] { Tensor r = matmul(av, bv); }, repeats);
    double flops = 2.0 * c.batch * c.m * c.n * c.k;
    std::printf("%-34s %10.1f %10.1f %10.1f %8.3f %8.3f\n", c.name, flops / raw_ms / 1e9,
                flops / kernel_ms / 1e9, flops / op_ms / 1e9, raw_ms / kernel_ms, raw_ms / op_ms);
  }
  cublasDestroy(raw);
}

void bench_rows(CudaBackend& backend, double peak_gbs, bool quick) {
  cudaStream_t stream = backend.stream();
  Device dev = Device::cuda(backend.device());
  struct Shape2 {
    int64_t rows, cols;
  };
  std::vector<Shape2> shapes = {
      {65536, 128}, {16384, 512}, {8192, 1024}, {4096, 4096}, {2048, 32000}};
  if (quick) shapes = {{8192, 1024}};
  std::printf(
      "\nRow kernels, float32: achieved bandwidth (compulsory bytes) and fraction of peak "
      "%.0f GB/s\n",
      peak_gbs);
  std::printf("%-26s %-14s %10s %10s %8s\n", "kernel", "rows x cols", "us", "GB/s", "of peak");
  auto report = [&](const char* kernel, Shape2 s, double ms, double bytes) {
    char shape[32];
    std::snprintf(shape, sizeof(shape), "%lldx%lld", static_cast<long long>(s.rows),
                  static_cast<long long>(s.cols));
    double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-26s %-14s %10.1f %10.1f %8.3f\n", kernel, shape, ms * 1e3, gbs, gbs / peak_gbs);
  };
  for (Shape2 s : shapes) {
    Generator gen(2);
    int64_t n = s.rows * s.cols;
    double e = 4.0;  // bytes per float
    Tensor x = Tensor::uniform({s.rows, s.cols}, -3, 3, gen).to(dev);
    Tensor dy = Tensor::uniform({s.rows, s.cols}, -1, 1, gen).to(dev);
    Tensor y = Tensor::empty({s.rows, s.cols}, DType::F32, dev);
    Tensor dx = Tensor::empty({s.rows, s.cols}, DType::F32, dev);
    Tensor gamma = Tensor::ones({s.cols}, DType::F32, dev),
           beta = Tensor::zeros({s.cols}, DType::F32, dev);
    Tensor dgamma = Tensor::empty({s.cols}, DType::F32, dev),
           dbeta = Tensor::empty({s.cols}, DType::F32, dev);
    Tensor mean = Tensor::empty({s.rows}, DType::F32, dev),
           rstd = Tensor::empty({s.rows}, DType::F32, dev);
    std::vector<int32_t> t(s.rows);
    for (int64_t r = 0; r < s.rows; ++r) t[r] = static_cast<int32_t>(gen.below(s.cols));
    Tensor targets = Tensor::from_data(t, {s.rows}, dev);
    Tensor loss = Tensor::empty({s.rows}, DType::F32, dev),
           lse = Tensor::empty({s.rows}, DType::F32, dev);
    Tensor scale = Tensor::full({s.rows}, 1.0 / s.rows, DType::F32, dev);
    int repeats = 20;
    report(
        "add (x + dy)", s,
        time_ms(
            stream, [&] { backend.binary(BinaryOp::Add, x.view(), dy.view(), y.view()); }, repeats),
        3 * n * e);
    report(
        "softmax", s,
        time_ms(
            stream, [&] { backend.softmax(x.view(), y.view(), s.rows, s.cols, false); }, repeats),
        2 * n * e);
    report("log_softmax", s,
           time_ms(
               stream, [&] { backend.softmax(x.view(), y.view(), s.rows, s.cols, true); }, repeats),
           2 * n * e);
    backend.softmax(x.view(), y.view(), s.rows, s.cols, false);
    report("softmax backward", s,
           time_ms(
               stream,
               [&] {
                 backend.softmax_backward(y.view(), dy.view(), dx.view(), s.rows, s.cols, false);
               },
               repeats),
           3 * n * e);
    report("layer_norm", s,
           time_ms(
               stream,
               [&] {
                 backend.layer_norm(x.view(), gamma.view(), beta.view(), y.view(), mean.view(),
                                    rstd.view(), s.rows, s.cols, 1e-5);
               },
               repeats),
           (2 * n + 2 * s.cols + 2 * s.rows) * e);
    report("layer_norm backward", s,
           time_ms(
               stream,
               [&] {
                 backend.layer_norm_backward(dy.view(), x.view(), mean.view(), rstd.view(),
                                             gamma.view(), dx.view(), dgamma.view(), dbeta.view(),
                                             s.rows, s.cols, false);
               },
               repeats),
           (3 * n + 3 * s.cols + 2 * s.rows) * e);
    report("cross_entropy", s,
           time_ms(
               stream,
               [&] {
                 backend.cross_entropy(x.view(), targets.view(), loss.view(), lse.view(), s.rows,
                                       s.cols, -100, 0.1);
               },
               repeats),
           (n + 3 * s.rows) * e);
    report("cross_entropy backward", s,
           time_ms(
               stream,
               [&] {
                 backend.cross_entropy_backward(x.view(), targets.view(), lse.view(), scale.view(),
                                                dx.view(), s.rows, s.cols, -100, 0.1);
               },
               repeats),
           (2 * n + 3 * s.rows) * e);
  }
}

int run(bool quick) {
  CudaBackend& backend = dynamic_cast<CudaBackend&>(backend_for(Device::cuda(0)));
  int dev = backend.device();
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  int mem_khz = 0, bus_bits = 0;
  cuda_ok(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev), "memory clock");
  cuda_ok(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev), "bus width");
  // Double data rate: two transfers per clock over the whole bus.
  double peak_gbs = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  std::printf(
      "bench_cuda: %s, %d SMs, compute %d.%d, %.0f GiB, memory %d MHz x %d bit = %.0f GB/s "
      "peak\n",
      prop.name, prop.multiProcessorCount, prop.major, prop.minor,
      prop.totalGlobalMem / 1073741824.0, mem_khz / 1000, bus_bits, peak_gbs);
  bench_gemm(backend, quick);
  bench_rows(backend, peak_gbs, quick);
  CudaMemoryStats m = backend.memory_stats();
  std::printf("\nallocator: %lld cudaMalloc calls, %lld cache hits, peak %.1f MiB in use\n",
              static_cast<long long>(m.device_mallocs), static_cast<long long>(m.cache_hits),
              m.peak_bytes_in_use / 1048576.0);
  return 0;
}

}  // namespace
#endif

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
#ifndef MIXLAB_HAVE_CUDA
  (void)quick;
  std::printf(
      "bench_cuda: this build has no CUDA backend (configure with -DMIXLAB_CUDA=ON on a "
      "machine with nvcc); nothing to measure\n");
  return 0;
#else
  if (!device_available(DeviceType::CUDA)) {
    std::printf("bench_cuda: no CUDA GPU is available on this machine; nothing to measure\n");
    return 0;
  }
  try {
    return run(quick);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
#endif
}
