// Optimizer updates, one pass over each parameter tensor; the per-element rules (PyTorch's) are
// shared with the CUDA kernels (backends/optim_updates.h).
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/strided.h"
#include "core/dtype_dispatch.h"

namespace mixlab {

void CpuBackend::adam_update(const View& param, const View& grad, const View& m, const View& v,
                             const AdamArgs& a) {
  dispatch_floating(param.dtype, "adam_update", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.as<T>();
    const T* g = grad.as<T>();
    T* pm = m.as<T>();
    T* pv = v.as<T>();
    parallel_for(param.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) adam_element(p, g, pm, pv, i, a);
    });
  });
}

void CpuBackend::sgd_update(const View& param, const View& grad, const View& buf,
                            const SgdArgs& a) {
  dispatch_floating(param.dtype, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.as<T>();
    const T* g = grad.as<T>();
    T* pb = buf.as<T>();
    parallel_for(param.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sgd_element(p, g, pb, i, a);
    });
  });
}

}  // namespace mixlab
