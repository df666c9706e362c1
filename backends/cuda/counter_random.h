// The counter-based uniform draw of core/random.h, compiled for host and device, so a dropout
// mask made on the GPU is bit-identical to the CPU's (same integer mixing, same exact conversion
// to double, same comparison). Plain C++ outside nvcc: the tests compare it with core/random.h
// on the host (tests/test_backend_parity.cpp, "cuda: counter_uniform ...").
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MIXLAB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MIXLAB_HOST_DEVICE inline
#endif

namespace mixlab::cuda {

// SplitMix64's finaliser, as mix64 in core/random.h.
MIXLAB_HOST_DEVICE uint64_t mix64_hd(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// counter_uniform(seed, i) of core/random.h: 53 random bits scaled exactly into [0, 1).
MIXLAB_HOST_DEVICE double counter_uniform_hd(uint64_t seed, uint64_t i) {
  return static_cast<double>(mix64_hd(mix64_hd(seed) ^ i) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace mixlab::cuda
