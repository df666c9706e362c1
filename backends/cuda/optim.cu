// Fused optimizer updates, one kernel pass per parameter tensor or per range of an optimizer's
// flat buffer (all parameters in one launch): parameter, gradient and state are read once and
// written once. The per-element rules are the CPU's own
// (backends/optim_updates.h: PyTorch's rules in double, rounded to the tensor's dtype).
#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* pm, T* pv, int64_t n, AdamArgs a) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    adam_element(p, g, pm, pv, i, a);
  }
}

template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* pb, int64_t n, SgdArgs a) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    sgd_element(p, g, pb, i, a);
  }
}

// Flat ranges: elements [0, decayed) use `a` (with weight decay), the rest `plain` (without).
template <typename T>
__global__ void adam_flat_kernel(T* p, const T* g, T* pm, T* pv, int64_t n, int64_t decayed,
                                 AdamArgs a, AdamArgs plain) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    adam_element(p, g, pm, pv, i, i < decayed ? a : plain);
  }
}

template <typename T>
__global__ void sgd_flat_kernel(T* p, const T* g, T* pb, int64_t n, int64_t decayed, SgdArgs a,
                                SgdArgs plain) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    sgd_element(p, g, pb, i, i < decayed ? a : plain);
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

void CudaBackend::adam_update_flat(const View& param, const View& grad, const View& m,
                                   const View& v, int64_t decayed, const AdamArgs& args) {
  int64_t n = param.numel();
  if (n == 0) return;
  activate();
  dispatch_floating(param.dtype, "adam_update_flat", [&](auto tag) {
    using T = decltype(tag);
    adam_flat_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(
        param.as<T>(), grad.as<T>(), m.as<T>(), v.as<T>(), n, decayed, args, without_decay(args));
  });
  check_launch("adam_update_flat");
}

void CudaBackend::sgd_update_flat(const View& param, const View& grad, const View& momentum_buffer,
                                  int64_t decayed, const SgdArgs& args) {
  int64_t n = param.numel();
  if (n == 0) return;
  activate();
  dispatch_floating(param.dtype, "sgd_update_flat", [&](auto tag) {
    using T = decltype(tag);
    sgd_flat_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(param.as<T>(), grad.as<T>(),
                                                            momentum_buffer.as<T>(), n, decayed,
                                                            args, without_decay(args));
  });
  check_launch("sgd_update_flat");
}

}  // namespace mixlab
