// The optimiser updates for one element, written once for the CPU loops
// (backends/cpu/cpu_optim.cpp) and the CUDA kernels (backends/cuda/optim.cu): PyTorch's rules,
// in double arithmetic, each state value rounded to the tensor's dtype when it is stored.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace mixlab {

struct AdamArgs {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  // AdamW: decay the weights directly, not through the gradient
  double bias_correction1, bias_correction2;  // 1 - beta^step
};
struct SgdArgs {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // momentum buffer starts as the gradient itself (PyTorch's rule)
};

// The same arguments with weight decay off: the undecayed part of a flat update (biases, norms).
template <typename Args>
MIXLAB_HOST_DEVICE Args without_decay(Args a) {
  a.weight_decay = 0;
  return a;
}

// Element i of parameter p with gradient g and moments m, v.
template <typename T>
MIXLAB_HOST_DEVICE void adam_element(T* p, const T* g, T* m, T* v, int64_t i, const AdamArgs& a) {
  double gi = g[i];
  double pi = p[i];
  if (a.weight_decay != 0) {
    if (a.decoupled)
      pi -= a.lr * a.weight_decay * pi;
    else
      gi += a.weight_decay * pi;
  }
  double mi = a.beta1 * m[i] + (1 - a.beta1) * gi;
  double vi = a.beta2 * v[i] + (1 - a.beta2) * gi * gi;
  m[i] = static_cast<T>(mi);
  v[i] = static_cast<T>(vi);
  // PyTorch's order: denom = √v / √(1 − β₂ᵗ) + ε, p −= (lr / (1 − β₁ᵗ)) · m / denom. The
  // per-step constants are the loop's invariants (hoisted): one square root and one division
  // per element, the two slowest instructions here (in double, they bound the whole pass).
  const double step_size = a.lr / a.bias_correction1;
  const double inv_sqrt_bc2 = 1.0 / sqrt(a.bias_correction2);
  double denom = sqrt(vi) * inv_sqrt_bc2 + a.eps;
  p[i] = static_cast<T>(pi - step_size * (mi / denom));
}

// Element i of parameter p with gradient g; the momentum buffer is read and written only when
// momentum is on.
template <typename T>
MIXLAB_HOST_DEVICE void sgd_element(T* p, const T* g, T* buf, int64_t i, const SgdArgs& a) {
  double d = g[i];
  if (a.weight_decay != 0) d += a.weight_decay * p[i];
  if (a.momentum != 0) {
    double mb = a.first_step ? d : a.momentum * buf[i] + (1 - a.dampening) * d;
    buf[i] = static_cast<T>(mb);
    d = a.nesterov ? d + a.momentum * mb : mb;
  }
  p[i] = static_cast<T>(p[i] - a.lr * d);
}

}  // namespace mixlab
