// Optimizer updates, one pass over each parameter tensor (PyTorch's update rules).
#include <cmath>

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
      for (int64_t i = b; i < e; ++i) {
        double gi = g[i];
        double pi = p[i];
        if (a.weight_decay != 0) {
          if (a.decoupled)
            pi -= a.lr * a.weight_decay * pi;
          else
            gi += a.weight_decay * pi;
        }
        double mi = a.beta1 * pm[i] + (1 - a.beta1) * gi;
        double vi = a.beta2 * pv[i] + (1 - a.beta2) * gi * gi;
        pm[i] = static_cast<T>(mi);
        pv[i] = static_cast<T>(vi);
        double denom = std::sqrt(vi / a.bias_correction2) + a.eps;
        p[i] = static_cast<T>(pi - a.lr * (mi / a.bias_correction1) / denom);
      }
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
      for (int64_t i = b; i < e; ++i) {
        double d = g[i];
        if (a.weight_decay != 0) d += a.weight_decay * p[i];
        if (a.momentum != 0) {
          double mb = a.first_step ? d : a.momentum * pb[i] + (1 - a.dampening) * d;
          pb[i] = static_cast<T>(mb);
          d = a.nesterov ? d + a.momentum * mb : mb;
        }
        p[i] = static_cast<T>(p[i] - a.lr * d);
      }
    });
  });
}

}  // namespace mixlab
