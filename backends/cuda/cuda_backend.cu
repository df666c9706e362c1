// Device discovery, the per-GPU backend objects, and host<->device memory traffic.
#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include "backends/cuda/allocator.h"
#include "backends/cuda/common.cuh"
#include "backends/cuda/device_checks.h"
#include "backends/cuda/fft_plans.h"
#include "backends/cuda/upload_staging.h"

namespace mixlab {

int cuda_device_count() {
  // Asked once: without a driver (or with no device) the runtime reports an error, which means
  // "no GPU" here, never an exception or an abort.
  static const int count = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

Backend& cuda_backend(int index) {
  // Backends live until the process ends (never destroyed): tensors freed during static
  // destruction still find their backend, and the driver reclaims the memory at exit.
  static std::mutex mutex;
  static auto* backends = new std::vector<CudaBackend*>();
  int count = cuda_device_count();
  check(count > 0, "cuda: no CUDA device is available (no GPU or no driver)");
  check(index >= 0 && index < count, "cuda: device index ", index, " out of range (", count,
        " device(s))");
  std::lock_guard<std::mutex> lock(mutex);
  if (backends->empty()) backends->resize(count, nullptr);
  if (!(*backends)[index]) (*backends)[index] = new CudaBackend(index);
  return *(*backends)[index];
}

CudaBackend::CudaBackend(int device) : device_(device) {
  MIXLAB_CUDA_CHECK(cudaSetDevice(device_));
  MIXLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  MIXLAB_CUDA_CHECK(
      cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device_));
  MIXLAB_CUDA_CHECK(cudaDeviceGetAttribute(&shared_bytes_per_block_,
                                           cudaDevAttrMaxSharedMemoryPerBlockOptin, device_));
  allocator_ = std::make_unique<CachingAllocator>(device_, stream_);
  fft_plans_ = std::make_unique<FftPlanCache>();
  staging_ = std::make_unique<UploadStaging>(stream_);
  checks_ = std::make_unique<DeviceChecks>(device_, stream_);
}

CudaBackend::~CudaBackend() {
  // Not reached in practice (backends are never destroyed); release what we can, quietly.
  staging_.reset();  // waits on events of the stream: before the stream goes
  checks_.reset();
  if (fft_plans_) fft_plans_->clear();
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaBackend::activate() const {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device_)
    MIXLAB_CUDA_CHECK(cudaSetDevice(device_));
}

cublasContext* CudaBackend::cublas() {
  std::lock_guard<std::mutex> lock(cublas_mutex_);
  if (!cublas_) {
    activate();
    cublasHandle_t handle = nullptr;
    MIXLAB_CUBLAS_CHECK(cublasCreate(&handle));
    cublasStatus_t s = cublasSetStream(handle, stream_);
    if (s != CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);
    MIXLAB_CUBLAS_CHECK(s);
    // Full FP32 products (no TF32): results agree with the CPU backend to float rounding.
    s = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);
    MIXLAB_CUBLAS_CHECK(s);
    cublas_ = handle;
  }
  return cublas_;
}

void CudaBackend::check_launch(const char* what) const {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    fail("CUDA error launching ", what, " on cuda:", device_, ": ", cudaGetErrorString(e), " [",
         cudaGetErrorName(e), "]");
}

int64_t CudaBackend::host_waits() const { return host_waits_ + staging_->waits(); }

void CudaBackend::empty_cache() {
  activate();
  allocator_->empty_cache();
}

CudaMemoryStats CudaBackend::memory_stats() const { return allocator_->stats(); }

// ---- memory -------------------------------------------------------------------------------------

void* CudaBackend::allocate(size_t bytes) {
  activate();
  return allocator_->allocate(bytes);
}

void CudaBackend::deallocate(void* ptr, size_t) { allocator_->deallocate(ptr); }

void CudaBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  activate();
  // On the stream, behind earlier kernels (which may still use a recycled block at dst). Small
  // uploads go through the page-locked ring and do not wait (upload_staging.h); larger ones are
  // waited for, so either way the caller may free or reuse `src` as soon as this returns.
  if (staging_->upload(dst, src, bytes)) return;
  MIXLAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  wait_for_stream();
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  activate();
  // On the stream, so it starts only after every kernel queued before it has written src.
  MIXLAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  wait_for_stream();
}

void CudaBackend::synchronize() {
  activate();
  wait_for_stream();
}

void CudaBackend::wait_for_stream() {
  // The index checks' record comes back with this wait (device_checks.h); a failed check
  // throws here, after the wait, so the stream is idle and the device usable.
  const int64_t mark = checks_->before_wait();
  ++host_waits_;
  MIXLAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  checks_->settle(mark);
}

}  // namespace mixlab
