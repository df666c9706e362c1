// Compiled with the CPU kernels' flags (cmake/layers.cmake), so the answer is theirs.
#include "backends/cpu/simd/kernel_registers.h"

#include "backends/cpu/simd/simd_lanes.h"

namespace mixlab::cpu {

const char* kernel_registers() {
#if defined(__AVX512F__)
  return "AVX-512";
#elif defined(MIXLAB_EMULATE_LANES16) && defined(MIXLAB_HAS_LANES)
  return "AVX2 (16 lanes emulated)";
#elif defined(MIXLAB_HAS_LANES)
  return "AVX2";
#else
  return "generic";
#endif
}

}  // namespace mixlab::cpu
