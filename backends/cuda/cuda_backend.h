// The CUDA backend: one CudaBackend per GPU, each with its own stream, caching allocator, cuBLAS
// handle and cuFFT plan cache. Every kernel of backends/backend.h is implemented in this folder,
// one file per kernel family (docs/kernels.md):
//
//   allocator.cu      caching allocator (size classes, no cudaMalloc per op in steady state)
//   cuda_backend.cu   device discovery, the backend objects, host<->device copies
//   elementwise.cu    copy (strided, dtype conversion), fill, unary, binary, where
//   reduce.cu         reduce over the middle axis, logcumsumexp and its backward
//   gemm.cu           cuBLAS strided-batched gemm (row-major through the operand swap)
//   rows.cu           softmax, layer norm, cross-entropy (warp or block per row)
//   index.cu          gather_rows, deterministic scatter_add_rows
//   random.cu         dropout masks (bit-identical to the CPU's)
//   fft.cu            cuFFT transforms with cached plans
//   optim.cu          fused Adam/AdamW and SGD updates
//
// and their headers: common.cuh (dispatch, launch shapes, warp/block reductions, strided
// walking, scratch memory), cuda_check.h (error checks), allocator.h, fft_plans.h,
// counter_random.h (the dropout generator for host and device).
//
// Ordering: every kernel, library call and copy of one backend goes on its stream, so device
// work runs in program order and freed blocks can be handed out again at once (stream order
// protects them). Copies to the host wait for the stream; copies from the host are complete when
// they return (the host buffer may be freed right after). Failures of any CUDA, cuBLAS or cuFFT
// call throw mixlab::Error naming the call and the library's error string.
//
// This header is included by host-only C++ (registry.cpp, tests, benchmarks): it needs the CUDA
// runtime's C API header only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "backends/backend.h"

struct cublasContext;  // cublasHandle_t is cublasContext*

namespace mixlab {

// GPUs visible to this process; 0 (never an exception) when there is no driver or no device.
int cuda_device_count();
// The backend of GPU `index` (created on first use); Error when it does not exist.
Backend& cuda_backend(int index);

// What the caching allocator holds, in bytes and calls.
struct CudaMemoryStats {
  size_t bytes_in_use = 0;  // handed out (rounded to size classes)
  size_t bytes_cached = 0;  // freed by their tensors, kept for reuse
  size_t peak_bytes_in_use = 0;
  int64_t device_mallocs = 0;  // cudaMalloc calls so far
  int64_t device_frees = 0;    // cudaFree calls so far (empty_cache, out-of-memory retries)
  int64_t cache_hits = 0;      // allocations served from the cache
};

class CachingAllocator;
struct FftPlanCache;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  const char* name() const override { return "cuda"; }
  DeviceType device_type() const override { return DeviceType::CUDA; }

  // ---- CUDA specifics (benchmarks, tests, the trainer's memory report) ----
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasContext* cublas();  // created on first use, bound to stream()
  void activate() const;    // makes this GPU current for the calling thread
  void empty_cache();       // returns every cached block to the driver
  CudaMemoryStats memory_stats() const;
  // Checks for an asynchronous error of an earlier kernel (throws Error naming `what`).
  void check_launch(const char* what) const;

  // ---- memory ----
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;

  // ---- kernels (see backends/backend.h for their contracts) ----
  void copy(const View& src, const View& dst) override;
  void fill(const View& dst, double value) override;

  void unary(UnaryOp op, const View& x, const View& y, double alpha) override;
  void binary(BinaryOp op, const View& a, const View& b, const View& out) override;
  void where(const View& cond, const View& a, const View& b, const View& out) override;

  void reduce(ReduceOp op, const View& x, int64_t outer, int64_t n, int64_t inner,
              const View& out) override;
  void logcumsumexp(const View& x, int64_t outer, int64_t n, int64_t inner, const View& y) override;
  void logcumsumexp_backward(const View& x, const View& y, const View& dy, int64_t outer, int64_t n,
                             int64_t inner, const View& dx) override;

  void gemm(const GemmArgs& args) override;

  void softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) override;
  void softmax_backward(const View& y, const View& dy, const View& dx, int64_t rows, int64_t cols,
                        bool log) override;
  void layer_norm(const View& x, const View& gamma, const View& beta, const View& y,
                  const View& mean, const View& rstd, int64_t rows, int64_t cols,
                  double eps) override;
  void layer_norm_backward(const View& dy, const View& x, const View& mean, const View& rstd,
                           const View& gamma, const View& dx, const View& dgamma, const View& dbeta,
                           int64_t rows, int64_t cols) override;
  void cross_entropy(const View& logits, const View& targets, const View& loss, const View& lse,
                     int64_t rows, int64_t cols, int64_t ignore_index, double smoothing) override;
  void cross_entropy_backward(const View& logits, const View& targets, const View& lse,
                              const View& scale, const View& dlogits, int64_t rows, int64_t cols,
                              int64_t ignore_index, double smoothing) override;

  void gather_rows(const View& table, const View& idx, const View& out, int64_t count,
                   int64_t dim) override;
  void scatter_add_rows(const View& grad, const View& idx, const View& dtable, int64_t count,
                        int64_t dim) override;

  void dropout_mask(const View& mask, double p, uint64_t seed) override;

  void fft(const View& x, const View& y, int64_t outer, int64_t n, int64_t inner,
           bool inverse) override;
  void fft2_real(const View& x, const View& lengths, const View& y, int64_t batch, int64_t n,
                 int64_t d) override;

  void adam_update(const View& param, const View& grad, const View& m, const View& v,
                   const AdamArgs& args) override;
  void sgd_update(const View& param, const View& grad, const View& momentum_buffer,
                  const SgdArgs& args) override;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  std::mutex cublas_mutex_;  // guards the lazy creation of cublas_
  std::unique_ptr<CachingAllocator> allocator_;
  std::unique_ptr<FftPlanCache> fft_plans_;
};

}  // namespace mixlab
