// MIXLAB_HOST_DEVICE marks a function that both the CPU code and the CUDA kernels compile (the
// elementwise formulas, the optimiser updates, the counter-based RNG), so the CPU reference and
// the GPU run the same source. Outside nvcc it is plain `inline`.
#pragma once

#if defined(__CUDACC__)
#define MIXLAB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MIXLAB_HOST_DEVICE inline
#endif
