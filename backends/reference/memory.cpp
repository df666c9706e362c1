// Data movement: host memory straight from the C++ allocator, copies between the host and this
// device (both are host memory), and the copy and fill kernels.
#include <cstring>
#include <new>

#include "backends/reference/reference_backend.h"

namespace mixlab {

// Host memory from new and delete; copies to and from the host are memcpy.
void* ReferenceBackend::allocate(size_t bytes) { return ::operator new(bytes); }
void ReferenceBackend::deallocate(void* ptr, size_t) { ::operator delete(ptr); }
void ReferenceBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void ReferenceBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

// dst[i] = src[i] over dst's shape, both strided; a conversion when the dtypes differ (to int32:
// truncation toward zero).
void ReferenceBackend::copy(const View& src, const View& dst) {
  dispatch_all(src.dtype, [&](auto s) {
    dispatch_all(dst.dtype, [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      for (int64_t i = 0; i < dst.numel(); ++i)
        dst.as<D>()[ref::strided_offset(dst, dst, i)] =
            static_cast<D>(src.as<S>()[ref::strided_offset(dst, src, i)]);
    });
  });
}

// dst[i] = value.
void ReferenceBackend::fill(const View& dst, double value) {
  dispatch_all(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < dst.numel(); ++i) dst.as<T>()[i] = static_cast<T>(value);
  });
}

}  // namespace mixlab
