// Dropout masks: mask[i] = 1 / (1 - p) where element i is kept, else 0 (core/random.h's draws),
// bit-identical to the CPU's mask (backends/cpu/cpu_index.cpp) because the draw is a pure integer
// function of (seed, i) evaluated by the same code (compiled for host and device). mix64(seed)
// and the threshold are hoisted to the host.
#include "backends/cuda/common.cuh"
#include "backends/fused_ops.h"
#include "core/random.h"

namespace mixlab {
namespace cuda {
namespace {

template <typename T>
__global__ void dropout_mask_kernel(T* mask, int64_t n, uint64_t threshold, uint64_t mixed_seed,
                                    T keep) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    mask[i] = fused::dropout_factor<T>(mixed_seed, static_cast<uint64_t>(i), threshold, keep);
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
    dropout_mask_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(
        mask.as<T>(), n, dropout_threshold(p), mix64(seed), fused::dropout_keep<T>(p));
  });
  check_launch("dropout_mask");
}

}  // namespace mixlab
