// The caching allocator behind CpuBackend::allocate/deallocate: host memory for CPU tensors.
//
// A training step frees and allocates the same activation and gradient sizes every step. Each
// request is rounded up to a size class (caching_allocator.cpp says which and why); a freed
// block goes onto the free list of its class and the next request of that class takes it back,
// so after a warm-up step a training loop makes no system allocation at all (tested by counting
// them). Blocks are 64-byte aligned (cache lines, AVX-512 loads, what FFTW prefers).
//
// Thread-safe: a tensor may die on a worker thread of the pool. Memory stays cached until
// release_host_cache() or the end of the process; set_host_cache_enabled(false) makes every
// free go back to the system instead. In a build with AddressSanitizer the cache is off and cannot
// be turned on, and requests are not rounded to classes: a reused block would hide a use-after-free
// from ASan, and a rounded one an overflow into the slack.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mixlab::cpu {

struct HostMemoryStats {
  size_t bytes_in_use = 0;         // handed out to tensors (rounded to their classes)
  size_t bytes_cached = 0;         // freed by their tensors, kept for reuse
  size_t peak_bytes_in_use = 0;    // the largest bytes_in_use so far
  size_t peak_bytes_held = 0;      // the largest bytes_in_use + bytes_cached so far
  int64_t system_allocations = 0;  // calls to the system allocator so far
  int64_t system_frees = 0;        // blocks given back to the system so far
  int64_t cache_hits = 0;          // requests served from a free list
};

void* host_allocate(size_t bytes);
// `bytes` is the size asked for when the block was allocated.
void host_deallocate(void* ptr, size_t bytes) noexcept;

HostMemoryStats host_memory_stats();
// Peaks restart from the present (in use, held): to measure one phase of a run.
void reset_host_memory_peaks();
// Gives every cached block back to the system.
void release_host_cache();

bool host_cache_enabled();
// Turning the cache off also releases what it holds. Blocks handed out before stay valid.
void set_host_cache_enabled(bool enabled);

// The size of the block a request of `bytes` receives (its class).
size_t host_size_class(size_t bytes);

}  // namespace mixlab::cpu
