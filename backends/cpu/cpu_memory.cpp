// Host memory: 64-byte aligned blocks (cache lines, AVX-512 loads, what FFTW prefers).
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/strided.h"
#include "core/dtype_dispatch.h"

namespace mixlab {

namespace {
// Training allocates and frees the same large activation sizes every step. glibc serves blocks
// above its mmap threshold with fresh mmap()s, so every step would page-fault its activations in
// again (measured: sys time as large as user time). Keeping such blocks in the heap lets freed
// memory be reused, like a caching allocator, at the cost of holding the peak footprint.
const bool heap_tuned = [] {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  return true;
}();
}  // namespace

void* CpuBackend::allocate(size_t bytes) {
  (void)heap_tuned;
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}
void CpuBackend::deallocate(void* ptr, size_t) { std::free(ptr); }
void CpuBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::copy(const View& src, const View& dst) {
  dispatch_all(src.dtype, [&](auto s_tag) {
    dispatch_all(dst.dtype, [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      const S* in = src.as<S>();
      D* out = dst.as<D>();
      cpu::StridedLoop<2>(dst, {&src, &dst}).run([&](auto off, int64_t n, auto st) {
        const S* a = in + off[0];
        D* b = out + off[1];
        if (st[0] == 1 && st[1] == 1)
          for (int64_t i = 0; i < n; ++i) b[i] = static_cast<D>(a[i]);
        else
          for (int64_t i = 0; i < n; ++i) b[i * st[1]] = static_cast<D>(a[i * st[0]]);
      });
    });
  });
}

void CpuBackend::fill(const View& dst, double value) {
  dispatch_all(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = dst.as<T>();
    T v = static_cast<T>(value);
    parallel_for(dst.numel(), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = v;
    });
  });
}

}  // namespace mixlab
