// Host memory: blocks of the caching allocator (caching_allocator.h), copies and fills.
#include <cstring>

#include "backends/cpu/caching_allocator.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/simd/transpose_copy.h"
#include "core/dtype_dispatch.h"

namespace mixlab {

void* CpuBackend::allocate(size_t bytes) { return cpu::host_allocate(bytes); }
void CpuBackend::deallocate(void* ptr, size_t bytes) { cpu::host_deallocate(ptr, bytes); }
void CpuBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

namespace {

// A float32 copy (its axes as `loop` coalesced them) whose innermost axis is contiguous in dst
// and strided in src, and whose next axis is contiguous in src (at most one axis outside them):
// a batch of matrix transposes, taken by blocks in registers (transpose_copy.h). False: not
// that pattern.
bool copy_as_transposes(const cpu::StridedLoop<2>& loop, const View& src, const View& dst) {
  if (src.dtype != DType::F32 || dst.dtype != DType::F32) return false;
  const int n = loop.ndim;
  if (n < 2 || n > 3) return false;
  const int64_t inner = loop.shape[n - 1], next = loop.shape[n - 2];
  const int64_t src_inner = loop.strides[0][n - 1], dst_next = loop.strides[1][n - 2];
  if (loop.strides[1][n - 1] != 1 || loop.strides[0][n - 2] != 1 || src_inner <= 1 ||
      dst_next < inner || inner < 8 || next < 8)
    return false;
  const int64_t count = n == 3 ? loop.shape[0] : 1;
  const int64_t src_step = n == 3 ? loop.strides[0][0] : 0,
                dst_step = n == 3 ? loop.strides[1][0] : 0;
  // Source rows are dst's inner index (src_inner apart), their elements dst's next index.
  cpu::transpose_matrices(src.as<float>(), src_inner, src_step, dst.as<float>(), dst_next, dst_step,
                          inner, next, count);
  return true;
}

}  // namespace

void CpuBackend::copy(const View& src, const View& dst) {
  const cpu::StridedLoop<2> loop(dst, {&src, &dst});
  if (copy_as_transposes(loop, src, dst)) return;
  dispatch_all(src.dtype, [&](auto s_tag) {
    dispatch_all(dst.dtype, [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      const S* in = src.as<S>();
      D* out = dst.as<D>();
      loop.run([&](auto off, int64_t n, auto st) {
        const S* a = in + off[0];
        D* b = out + off[1];
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < n; ++i) b[i] = static_cast<D>(a[i]);
        } else if (st[0] == 0 && st[1] == 1) {  // a broadcast value (Tensor::fill_ of a view)
          const D v = static_cast<D>(a[0]);
          for (int64_t i = 0; i < n; ++i) b[i] = v;
        } else {
          for (int64_t i = 0; i < n; ++i) b[i * st[1]] = static_cast<D>(a[i * st[0]]);
        }
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
