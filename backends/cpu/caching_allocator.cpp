// The host caching allocator (see caching_allocator.h).
#include "backends/cpu/caching_allocator.h"

#include <malloc.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "backends/tracing_backend.h"
#include "core/sanitizers.h"

namespace mixlab::cpu {
namespace {

// Under ASan every block goes straight back to the system, so that ASan's quarantine still
// reports a use after free (a cached block would be handed to the next tensor and read as valid
// memory), and blocks keep their requested size (rounded to the 64-byte alignment only), so that
// an overflow past the end is not hidden in a class's slack.
constexpr bool kSanitized = MIXLAB_ASAN;
constexpr size_t kAlign = 64;

// Size classes. Up to 4 KiB a request is rounded to a multiple of 64 bytes (the alignment every
// block gets anyway): biases, norms and scalars waste nothing and share few classes. Above, four
// classes per power of two (2^k, 1.25, 1.5, 1.75 times 2^k): at most 25% of a block is slack
// (about 12% on average), where powers of two would waste up to half. Coarser classes would let
// more sizes share blocks, but a step's sizes repeat exactly every step, so exact reuse is what
// matters and finer classes keep the resident footprint close to what the tensors ask for. (Large
// blocks are mmapped by glibc, so their untouched slack pages are not even resident.)
constexpr size_t kSmallLimit = 4096;
constexpr int kSmallClasses = kSmallLimit / kAlign;  // 64 B .. 4 KiB
constexpr int kSmallLog2 = 12;                       // log2(kSmallLimit)
constexpr int kClasses = kSmallClasses + 4 * (64 - kSmallLog2);

int class_index(size_t bytes) {
  if (bytes <= kSmallLimit)
    return static_cast<int>((std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign) - 1;
  // 2^k < bytes <= 2^(k+1): the class is ceil(bytes / (2^k / 4)) quarters, 5..8 of them.
  int k = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes - 1));
  size_t quarter = (size_t(1) << k) / 4;
  int quarters = static_cast<int>((bytes + quarter - 1) / quarter);
  return kSmallClasses + 4 * (k - kSmallLog2) + (quarters - 5);
}

size_t class_size(int index) {
  if (index < kSmallClasses) return static_cast<size_t>(index + 1) * kAlign;
  int k = kSmallLog2 + (index - kSmallClasses) / 4;
  int quarters = 5 + (index - kSmallClasses) % 4;
  return (size_t(1) << k) / 4 * quarters;
}

size_t block_size(size_t bytes) {
  return kSanitized ? (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign
                    : class_size(class_index(bytes));
}

void print_summary();

struct Allocator {
  std::mutex mutex;
  std::array<std::vector<void*>, kClasses> free_lists;
  HostMemoryStats stats;
  bool enabled = !kSanitized;

  Allocator() {
    if (!enabled) {
      // Without the cache, keep large blocks in glibc's heap rather than in fresh mmap()s, so
      // that freed activations are reused instead of being page-faulted in again every step
      // (measured before the cache existed: sys time as large as user time).
      mallopt(M_MMAP_THRESHOLD, 256 << 20);
      mallopt(M_TRIM_THRESHOLD, 512 << 20);
    }
    if (debug_level() > 0) std::atexit(print_summary);
  }

  // Called with the mutex held; returns the blocks for the caller to free outside it.
  std::vector<void*> take_cached() {
    std::vector<void*> out;
    for (auto& list : free_lists) {
      out.insert(out.end(), list.begin(), list.end());
      list.clear();
      list.shrink_to_fit();
    }
    stats.bytes_cached = 0;
    stats.system_frees += static_cast<int64_t>(out.size());
    return out;
  }

  void note_in_use(size_t size) {
    stats.bytes_in_use += size;
    stats.peak_bytes_in_use = std::max(stats.peak_bytes_in_use, stats.bytes_in_use);
    stats.peak_bytes_held =
        std::max(stats.peak_bytes_held, stats.bytes_in_use + stats.bytes_cached);
  }
};

// Never destroyed: tensors held by static objects are freed after main returns, in an order no
// one controls, and must still find their allocator.
Allocator& allocator() {
  static Allocator* a = new Allocator;
  return *a;
}

void print_summary() {
  HostMemoryStats s = host_memory_stats();
  constexpr double MiB = 1024.0 * 1024.0;
  std::fprintf(stderr,
               "[mixlab cpu] host memory (MIXLAB_DEBUG): cache %s; in use %.1f MiB, cached %.1f "
               "MiB, peak in use %.1f MiB, peak held %.1f MiB; %lld system allocations, %lld "
               "system frees, %lld cache hits\n",
               host_cache_enabled() ? "on" : "off", s.bytes_in_use / MiB, s.bytes_cached / MiB,
               s.peak_bytes_in_use / MiB, s.peak_bytes_held / MiB,
               static_cast<long long>(s.system_allocations), static_cast<long long>(s.system_frees),
               static_cast<long long>(s.cache_hits));
}

}  // namespace

size_t host_size_class(size_t bytes) { return block_size(bytes); }

void* host_allocate(size_t bytes) {
  Allocator& a = allocator();
  size_t size = block_size(bytes);
  if (!kSanitized) {
    std::lock_guard<std::mutex> lock(a.mutex);
    auto& list = a.free_lists[class_index(bytes)];
    if (a.enabled && !list.empty()) {
      void* p = list.back();
      list.pop_back();
      a.stats.bytes_cached -= size;
      ++a.stats.cache_hits;
      a.note_in_use(size);
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (!p) {  // out of memory: what the cache holds may be enough
    release_host_cache();
    p = std::aligned_alloc(kAlign, size);
    if (!p) throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> lock(a.mutex);
  ++a.stats.system_allocations;
  a.note_in_use(size);
  return p;
}

void host_deallocate(void* ptr, size_t bytes) noexcept {
  if (!ptr) return;
  Allocator& a = allocator();
  size_t size = block_size(bytes);
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    a.stats.bytes_in_use -= size;
    if (a.enabled) {
      try {
        a.free_lists[class_index(bytes)].push_back(ptr);
        a.stats.bytes_cached += size;
        return;
      } catch (const std::bad_alloc&) {
        // no room to remember the block: give it back below
      }
    }
    ++a.stats.system_frees;
  }
  std::free(ptr);
}

HostMemoryStats host_memory_stats() {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.stats;
}

void reset_host_memory_peaks() {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.stats.peak_bytes_in_use = a.stats.bytes_in_use;
  a.stats.peak_bytes_held = a.stats.bytes_in_use + a.stats.bytes_cached;
}

void release_host_cache() {
  Allocator& a = allocator();
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    blocks = a.take_cached();
  }
  for (void* p : blocks) std::free(p);
}

bool host_cache_enabled() {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.enabled;
}

void set_host_cache_enabled(bool enabled) {
  Allocator& a = allocator();
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    a.enabled = enabled && !kSanitized;
    if (!a.enabled) blocks = a.take_cached();
  }
  for (void* p : blocks) std::free(p);
}

}  // namespace mixlab::cpu
