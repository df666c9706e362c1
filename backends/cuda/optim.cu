// Fused optimizer updates, one kernel pass per parameter tensor: parameter, gradient and state
// are read once and written once. Arithmetic in double like the CPU (backends/cpu/cpu_optim.cpp,
// PyTorch's rules), then rounded to the tensor's dtype.
#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* pm, T* pv, int64_t n, AdamArgs a) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
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
    double denom = sqrt(vi / a.bias_correction2) + a.eps;
    p[i] = static_cast<T>(pi - a.lr * (mi / a.bias_correction1) / denom);
  }
}

template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* pb, int64_t n, SgdArgs a) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    double d = g[i];
    if (a.weight_decay != 0) d += a.weight_decay * p[i];
    if (a.momentum != 0) {
      double mb = a.first_step ? d : a.momentum * pb[i] + (1 - a.dampening) * d;
      pb[i] = static_cast<T>(mb);
      d = a.nesterov ? d + a.momentum * mb : mb;
    }
    p[i] = static_cast<T>(p[i] - a.lr * d);
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::adam_update(const View& param, const View& grad, const View& m, const View& v,
                              const AdamArgs& args) {
  int64_t n = param.numel();
  if (n == 0) return;
  activate();
  dispatch_floating(param.dtype, "adam_update", [&](auto tag) {
    using T = decltype(tag);
    adam_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(param.as<T>(), grad.as<T>(), m.as<T>(),
                                                        v.as<T>(), n, args);
  });
  check_launch("adam_update");
}

void CudaBackend::sgd_update(const View& param, const View& grad, const View& momentum_buffer,
                             const SgdArgs& args) {
  int64_t n = param.numel();
  if (n == 0) return;
  activate();
  dispatch_floating(param.dtype, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    sgd_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(param.as<T>(), grad.as<T>(),
                                                       momentum_buffer.as<T>(), n, args);
  });
  check_launch("sgd_update");
}

}  // namespace mixlab
