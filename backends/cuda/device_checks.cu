// The record behind the GPU's index checks (device_checks.h says why) and the check kernel.
#include "backends/cuda/device_checks.h"

#include <cuda_runtime.h>

#include "backends/cuda/common.cuh"

namespace mixlab {

DeviceChecks::DeviceChecks(int device, cudaStream_t stream) : device_(device), stream_(stream) {
  void* d = nullptr;
  MIXLAB_CUDA_CHECK(cudaMalloc(&d, sizeof(CheckRecord)));
  on_device_ = static_cast<CheckRecord*>(d);
  MIXLAB_CUDA_CHECK(cudaMemsetAsync(on_device_, 0, sizeof(CheckRecord), stream_));
  void* h = nullptr;
  if (cudaHostAlloc(&h, sizeof(CheckRecord), cudaHostAllocDefault) == cudaSuccess) {
    on_host_ = static_cast<CheckRecord*>(h);
  } else {  // still correct from ordinary memory, only the copy back is not asynchronous
    cudaGetLastError();
    pinned_ = false;
    on_host_ = new CheckRecord;
  }
  *on_host_ = CheckRecord{};
}

DeviceChecks::~DeviceChecks() {
  // Not reached in practice (backends live to the end of the process); quietly.
  if (on_device_) cudaFree(on_device_);
  if (on_host_ && pinned_) cudaFreeHost(on_host_);
  if (on_host_ && !pinned_) delete on_host_;
}

int64_t DeviceChecks::before_wait() {
  std::lock_guard<std::mutex> lock(mutex_);
  read_back_ = !words_.empty();
  if (read_back_) {
    MIXLAB_CUDA_CHECK(cudaMemcpyAsync(on_host_, on_device_, sizeof(CheckRecord),
                                      cudaMemcpyDeviceToHost, stream_));
    MIXLAB_CUDA_CHECK(cudaMemsetAsync(on_device_, 0, sizeof(CheckRecord), stream_));
  }
  return next_;
}

void DeviceChecks::settle(int64_t mark) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!read_back_) return;
  read_back_ = false;
  const CheckRecord seen = *on_host_;
  std::string what, why;
  if (seen.failed) {
    auto found = words_.find(seen.check);
    if (found != words_.end()) std::tie(what, why) = found->second;
    *on_host_ = CheckRecord{};  // the device's copy was reset right after it was read
  }
  words_.erase(words_.begin(), words_.lower_bound(mark));
  lock.unlock();
  if (seen.failed)
    fail(what.empty() ? "an index check" : what, " ", seen.value, " ", why,
         " (found on cuda:", device_, " by a check queued before this wait for the GPU)");
}

namespace cuda {
namespace {
__global__ void check_indices_kernel(const int32_t* ids, int64_t n, int64_t limit, int64_t allowed,
                                     int64_t number, CheckRecord* record) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t v = ids[i];
    if ((v < 0 || v >= limit) && v != allowed) {
      if (atomicCAS(&record->failed, 0, 1) == 0) {
        record->check = number;
        record->value = v;
      }
      return;
    }
  }
}
}  // namespace
}  // namespace cuda

size_t DeviceChecks::queue(const int32_t* ids, int64_t n, int64_t limit, int64_t allowed,
                           const char* what, const char* why) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t number = next_++;
  words_.emplace(number, std::make_pair(std::string(what), std::string(why)));
  cuda::check_indices_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, stream_>>>(
      ids, n, limit, allowed, number, on_device_);
  return words_.size();
}

void CudaBackend::check_indices(const View& idx, int64_t limit, int64_t allowed, const char* what,
                                const char* why) {
  const int64_t n = idx.numel();
  if (n == 0) return;
  activate();
  const size_t unsettled = checks_->queue(idx.as<int32_t>(), n, limit, allowed, what, why);
  check_launch("check_indices");
  // Settle the checks now and then when nothing else waits for the GPU, so their words do not
  // pile up (a loop that never reads a result back); a training step reads its losses back far
  // more often than every 65,536 checks.
  if (unsettled >= (size_t(1) << 16)) synchronize();
}

}  // namespace mixlab
