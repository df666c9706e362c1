// MIXLAB_HOST_DEVICE marks a function that the host code and the CUDA kernels both compile (the
// elementwise formulas, the optimiser updates, the counter-based RNG), so the reference backend,
// the CPU and the GPU run the same source. Outside nvcc it is plain `inline`.
#pragma once

#if defined(__CUDACC__)
#define MIXLAB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MIXLAB_HOST_DEVICE inline
#endif
