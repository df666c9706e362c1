// The float32 rows in the build's vector registers: `vector_math::` is avx512:: (avx512_math.h)
// on AVX-512 builds and avx2:: (avx2_math.h) on AVX2 ones, whose rows share names and contracts
// (softmax_row, exp_shifted_row, gelu_row, gelu_grad_row, gelu_and_slope_row), so a kernel picks
// them in one place: under MIXLAB_HAS_LANES (simd_lanes.h), with its portable loop after.
#pragma once
#include "backends/cpu/avx2_math.h"
#include "backends/cpu/avx512_math.h"
#include "backends/cpu/simd_lanes.h"

namespace mixlab::cpu {
#if defined(__AVX512F__)
namespace vector_math = avx512;
#elif defined(MIXLAB_HAS_LANES)
namespace vector_math = avx2;
#endif
}  // namespace mixlab::cpu
