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
//   fft.cu            cuFFT transforms with cached plans, the long circular convolution
//   optim.cu          fused Adam/AdamW and SGD updates
//   upload_staging.cu uploads through a page-locked ring (no wait for the GPU)
//   device_checks.cu  index checks whose failures are reported at the next wait
//
// and their headers: common.cuh (dispatch, launch shapes, warp/block reductions, strided
// walking, scratch memory), cuda_check.h (error checks), allocator.h, fft_plans.h. The formulas
// shared with the CPU (MIXLAB_HOST_DEVICE) are backends/elementwise_ops.h,
// backends/optim_updates.h and core/random.h.
//
// Ordering: every kernel, library call and copy of one backend goes on its stream, so device
// work runs in program order and freed blocks can be handed out again at once (stream order
// protects them). Copies to the host wait for the stream; copies from the host are queued on it
// (small ones through a page-locked ring, without waiting: upload_staging.h), and the host buffer
// may be freed or reused as soon as they return. An index check that failed on the GPU
// (check_indices) is thrown by the next wait for the stream: a copy to the host or
// synchronize(). Failures of any CUDA, cuBLAS or cuFFT call throw mixlab::Error naming the call
// and the library's error string.
//
// This header is included by host-only C++ (registry.cpp, tests, benchmarks): it needs the CUDA
// runtime's C API header only.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
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
class UploadStaging;
class DeviceChecks;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  const char* name() const override { return "cuda"; }
  DeviceType device_type() const override { return DeviceType::CUDA; }

  // ---- CUDA specifics (benchmarks, tests, the trainer's memory report) ----
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  int multiprocessors() const { return multiprocessors_; }  // sizes grids that fill the GPU
  // The shared memory one block may use, past the default 48 KiB by opting in (attention.cu).
  size_t shared_bytes_per_block() const { return static_cast<size_t>(shared_bytes_per_block_); }
  cublasContext* cublas();  // created on first use, bound to stream()
  void activate() const;    // makes this GPU current for the calling thread
  void empty_cache();       // returns every cached block to the driver
  CudaMemoryStats memory_stats() const;
  // Times the host has waited for this GPU so far: copies to the host, synchronize(), uploads
  // too large to stage, and staged uploads that found the ring still in use (bench_train_step
  // reports them per step: a training step should wait as little as possible).
  int64_t host_waits() const;
  // Checks for an asynchronous error of an earlier kernel (throws Error naming `what`).
  void check_launch(const char* what) const;

  // ---- memory ----
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;

  // ---- kernels (backends/kernels.def for their contracts) ----
#define MIXLAB_KERNEL(name, params, args, label) void name params override;
#include "backends/kernels.def"
#undef MIXLAB_KERNEL

 private:
  int device_;
  int multiprocessors_ = 1;
  int shared_bytes_per_block_ = 48 * 1024;  // queried once: attention asks on every call
  cudaStream_t stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  std::mutex cublas_mutex_;  // guards the lazy creation of cublas_
  std::unique_ptr<CachingAllocator> allocator_;
  std::unique_ptr<FftPlanCache> fft_plans_;
  std::unique_ptr<UploadStaging> staging_;  // small uploads that do not wait for the stream
  std::atomic<int64_t> host_waits_{0};      // the waits above, but the staging ring's own
  std::unique_ptr<DeviceChecks> checks_;    // index checks, settled at the next wait

  // Every wait for the stream: reads the index checks' record back with it.
  void wait_for_stream();
};

}  // namespace mixlab
