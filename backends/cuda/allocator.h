// The caching device allocator behind CudaBackend::allocate/deallocate.
//
// Requests are rounded up to size classes (512 bytes minimum, then four classes per power of
// two, so at most 25% is wasted); a freed block goes to the free list of its class and the next
// request of that class takes it back without calling the driver (or, when that class has none
// cached, the smallest cached block of at most twice the size). After a warm-up step a
// training loop allocates nothing from the driver. Blocks come from plain cudaMalloc (never
// managed memory). Reuse is safe without events because every user of one backend's memory
// works on that backend's single stream: a block freed while a kernel still reads it can only
// be written by work queued after that kernel.
//
// When cudaMalloc reports out-of-memory the cache is emptied and the request retried once; a
// second failure is an Error with the request, what is in use, and what was cached.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <map>
#include <unordered_map>
#include <vector>

#include "backends/cuda/cuda_backend.h"

namespace mixlab {

class CachingAllocator {
 public:
  CachingAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~CachingAllocator() = default;  // blocks are left to the driver at exit

  void* allocate(size_t bytes);
  void deallocate(void* ptr) noexcept;  // unknown pointers are ignored
  void empty_cache();
  CudaMemoryStats stats() const;

  // The class a request of `bytes` is served from.
  static size_t size_class(size_t bytes);

 private:
  void release_cached_locked();

  int device_;
  cudaStream_t stream_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;  // block size -> cached blocks
  std::unordered_map<void*, size_t> live_;     // handed out -> class size
  CudaMemoryStats stats_;
};

}  // namespace mixlab
