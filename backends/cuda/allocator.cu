// The caching device allocator (see allocator.h).
#include <string>

#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_check.h"

namespace mixlab {

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= 512) return 512;
  // 2^k < bytes <= 2^(k+1): four classes per doubling, at most 2 MiB apart for huge blocks.
  int k = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes - 1));
  size_t step = (size_t(1) << k) / 4;
  if (step > (size_t(2) << 20)) step = size_t(2) << 20;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t want = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  // The smallest cached block that fits, up to twice the class.
  auto it = free_.lower_bound(want);
  if (it != free_.end() && it->first <= 2 * want) {
    size_t size = it->first;
    void* p = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    live_[p] = size;
    stats_.bytes_cached -= size;
    stats_.bytes_in_use += size;
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use)
      stats_.peak_bytes_in_use = stats_.bytes_in_use;
    ++stats_.cache_hits;
    return p;
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, want);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: the retry may succeed
    release_cached_locked();
    e = cudaMalloc(&p, want);
  }
  if (e != cudaSuccess) {
    const char* text = cudaGetErrorString(e);
    cudaGetLastError();
    fail("CUDA out of memory or allocation failure on cuda:", device_, ": cudaMalloc(", want,
         " bytes) for a request of ", bytes, " bytes failed: ", text, " (in use ",
         stats_.bytes_in_use, " bytes, the cache was emptied first)");
  }
  ++stats_.device_mallocs;
  live_[p] = want;
  stats_.bytes_in_use += want;
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use)
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  return p;
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  size_t size = it->second;
  live_.erase(it);
  try {
    free_[size].push_back(ptr);
  } catch (...) {
    return;  // out of host memory: leak the block rather than throw from a destructor
  }
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
}

void CachingAllocator::release_cached_locked() {
  // Blocks in the cache may still be read by queued kernels: finish them first.
  cudaStreamSynchronize(stream_);
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      cudaFree(p);
      ++stats_.device_frees;
      stats_.bytes_cached -= size;
    }
  }
  free_.clear();
  cudaGetLastError();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

CudaMemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace mixlab
