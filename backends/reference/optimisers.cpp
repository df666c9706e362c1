// Optimiser updates: each element by PyTorch's rule as backends/optim_updates.h writes it (the
// formula every backend calls), one parameter tensor or a whole flat buffer at a time.
#include "backends/optim_updates.h"
#include "backends/reference/reference_backend.h"

namespace mixlab {
namespace {

// Adam(W) on elements [0, n), weight decay on [0, decayed) only.
void adam_elements(const View& param, const View& grad, const View& m, const View& v,
                   int64_t decayed, const AdamArgs& a) {
  dispatch_floating(param.dtype, "adam_update", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < param.numel(); ++i)
      adam_element(param.as<T>(), grad.as<T>(), m.as<T>(), v.as<T>(), i,
                   i < decayed ? a : without_decay(a));
  });
}

// SGD (momentum, Nesterov) on elements [0, n), weight decay on [0, decayed) only.
void sgd_elements(const View& param, const View& grad, const View& buf, int64_t decayed,
                  const SgdArgs& a) {
  dispatch_floating(param.dtype, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < param.numel(); ++i)
      sgd_element(param.as<T>(), grad.as<T>(), buf.as<T>(), i, i < decayed ? a : without_decay(a));
  });
}

}  // namespace

// Adam: g += λ p (AdamW instead: p −= lr λ p), m = β₁ m + (1 − β₁) g, v = β₂ v + (1 − β₂) g²,
//       p −= lr / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)
// SGD:  d = g + λ p, b = μ b + (1 − τ) d (b = d on the first step), d = b (Nesterov: d + μ b),
//       p −= lr d
// (λ: weight decay, on the flat buffer's first `decayed` elements only.)
void ReferenceBackend::adam_update(const View& param, const View& grad, const View& m,
                                   const View& v, const AdamArgs& a) {
  adam_elements(param, grad, m, v, param.numel(), a);
}
void ReferenceBackend::sgd_update(const View& param, const View& grad, const View& buf,
                                  const SgdArgs& a) {
  sgd_elements(param, grad, buf, param.numel(), a);
}
void ReferenceBackend::adam_update_flat(const View& param, const View& grad, const View& m,
                                        const View& v, int64_t decayed, const AdamArgs& a) {
  adam_elements(param, grad, m, v, decayed, a);
}
void ReferenceBackend::sgd_update_flat(const View& param, const View& grad, const View& buf,
                                       int64_t decayed, const SgdArgs& a) {
  sgd_elements(param, grad, buf, decayed, a);
}

}  // namespace mixlab
