// Dropout masks: mask[i] = counter_uniform(seed, i) >= p ? 1 / (1 - p) : 0, bit-identical to the
// CPU's mask (backends/cpu/cpu_index.cpp) because the draw is a pure integer function of
// (seed, i) evaluated by the same code (core/random.h, compiled for host and device). mix64(seed)
// is hoisted to the host.
#include "backends/cuda/common.cuh"
#include "core/random.h"

namespace mixlab {
namespace cuda {
namespace {

template <typename T>
__global__ void dropout_mask_kernel(T* mask, int64_t n, double p, uint64_t mixed_seed, T keep) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    // counter_uniform(seed, i) with mix64(seed) precomputed.
    double u = static_cast<double>(mix64(mixed_seed ^ static_cast<uint64_t>(i)) >> 11) *
               (1.0 / 9007199254740992.0);
    mask[i] = u >= p ? keep : T(0);
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::dropout_mask(const View& mask, double p, uint64_t seed) {
  int64_t n = mask.numel();
  if (n == 0) return;
  activate();
  dispatch_floating(mask.dtype, "dropout_mask", [&](auto tag) {
    using T = decltype(tag);
    T keep = static_cast<T>(1.0 / (1.0 - p));
    dropout_mask_kernel<T>
        <<<grid_for(n), kBlock, 0, stream_>>>(mask.as<T>(), n, p, mix64(seed), keep);
  });
  check_launch("dropout_mask");
}

}  // namespace mixlab
