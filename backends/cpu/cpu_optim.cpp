// Optimizer updates, one pass over a parameter tensor or over a range of an optimizer's flat
// buffer; the per-element rules (PyTorch's) are shared with the CUDA kernels
// (backends/optim_updates.h). Every element is independent, so the split over threads changes
// no number.
#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/strided.h"
#include "core/dtype_dispatch.h"

namespace mixlab {

namespace {
// range(b, e, args) over [0, n) split over threads: `a` (with its weight decay) for
// i < decayed, the same arguments without decay after.
template <typename Args, typename Range>
void for_each_range(int64_t n, int64_t decayed, const Args& a, Range range) {
  const Args plain = without_decay(a);
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    const int64_t split = std::clamp(decayed, b, e);
    range(b, split, a);
    range(split, e, plain);
  });
}

// Elements [b, e) with restrict arrays and the arguments copied to a local: with the stores
// out of the arguments' reach, the compiler hoists the decay branches and vectorises the
// element's double arithmetic (8 lanes under AVX-512; each lane computes exactly what the
// scalar rule does, so the numbers are the same).
template <typename T>
void adam_range(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t b,
                int64_t e, const AdamArgs a) {
  for (int64_t i = b; i < e; ++i) adam_element(p, g, m, v, i, a);
}
template <typename T>
void sgd_range(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t b, int64_t e,
               const SgdArgs a) {
  for (int64_t i = b; i < e; ++i) sgd_element(p, g, buf, i, a);
}

void adam_loop(const View& param, const View& grad, const View& m, const View& v, int64_t decayed,
               const AdamArgs& a) {
  dispatch_floating(param.dtype, "adam_update", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.as<T>();
    const T* g = grad.as<T>();
    T* pm = m.as<T>();
    T* pv = v.as<T>();
    for_each_range(param.numel(), decayed, a, [&](int64_t b, int64_t e, const AdamArgs& args) {
      adam_range(p, g, pm, pv, b, e, args);
    });
  });
}

void sgd_loop(const View& param, const View& grad, const View& buf, int64_t decayed,
              const SgdArgs& a) {
  dispatch_floating(param.dtype, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    T* p = param.as<T>();
    const T* g = grad.as<T>();
    T* pb = buf.as<T>();
    for_each_range(param.numel(), decayed, a, [&](int64_t b, int64_t e, const SgdArgs& args) {
      sgd_range(p, g, pb, b, e, args);
    });
  });
}
}  // namespace

void CpuBackend::adam_update(const View& param, const View& grad, const View& m, const View& v,
                             const AdamArgs& a) {
  adam_loop(param, grad, m, v, param.numel(), a);
}

void CpuBackend::sgd_update(const View& param, const View& grad, const View& buf,
                            const SgdArgs& a) {
  sgd_loop(param, grad, buf, param.numel(), a);
}

void CpuBackend::adam_update_flat(const View& param, const View& grad, const View& m, const View& v,
                                  int64_t decayed, const AdamArgs& a) {
  adam_loop(param, grad, m, v, decayed, a);
}

void CpuBackend::sgd_update_flat(const View& param, const View& grad, const View& buf,
                                 int64_t decayed, const SgdArgs& a) {
  sgd_loop(param, grad, buf, decayed, a);
}

}  // namespace mixlab
