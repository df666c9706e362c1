// Index checks, embedding lookup (row gather), its backward (row scatter-add), and dropout
// masks.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/strided.h"
#include "backends/fused_ops.h"
#include "core/dtype_dispatch.h"
#include "core/random.h"

namespace mixlab {

void CpuBackend::check_indices(const View& idx, int64_t limit, int64_t allowed, const char* what,
                               const char* why) {
  const int32_t* ids = idx.as<int32_t>();
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = ids[i];
    if ((v < 0 || v >= limit) && v != allowed) fail(what, " ", v, " ", why);
  }
}

void CpuBackend::gather_rows(const View& table, const View& idx, const View& out, int64_t count,
                             int64_t dim) {
  size_t row_bytes = dim * dtype_size(table.dtype);
  const char* src = static_cast<const char*>(table.data);
  char* dst = static_cast<char*>(out.data);
  const int32_t* ids = idx.as<int32_t>();
  parallel_for(count, 256, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (ids[i] < 0)  // -1: a zero row (take_rows' padding)
        std::memset(dst + i * row_bytes, 0, row_bytes);
      else
        std::memcpy(dst + i * row_bytes, src + ids[i] * row_bytes, row_bytes);
    }
  });
}

void CpuBackend::scatter_add_rows(const View& grad, const View& idx, const View& dtable,
                                  int64_t count, int64_t dim) {
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto tag) {
    using T = decltype(tag);
    const int32_t* ids = idx.as<int32_t>();
    // Parallel over columns, sequential over rows: no two threads touch one element and the
    // summation order is fixed, so repeated ids accumulate deterministically.
    parallel_for(dim, 64, [&](int64_t cb, int64_t ce) {
      for (int64_t i = 0; i < count; ++i) {
        const T* g = grad.as<T>() + i * dim;
        T* d = dtable.as<T>() + ids[i] * dim;
        for (int64_t c = cb; c < ce; ++c) d[c] += g[c];
      }
    });
  });
}

void CpuBackend::dropout_mask(const View& mask, double p, uint64_t seed) {
  dispatch_floating(mask.dtype, "dropout_mask", [&](auto tag) {
    using T = decltype(tag);
    T* m = mask.as<T>();
    const T keep = fused::dropout_keep<T>(p);
    const uint64_t mixed = mix64(seed), threshold = dropout_threshold(p);
    // The formula itself, element by element: the reference the fused kernels' runs are tested
    // against (they draw the same mask).
    parallel_for(mask.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        m[i] = fused::dropout_factor<T>(mixed, static_cast<uint64_t>(i), threshold, keep);
    });
  });
}

}  // namespace mixlab
