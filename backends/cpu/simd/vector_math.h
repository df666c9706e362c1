// The float32 rows in the build's vector registers: `vector_math::` is avx512:: (avx512_math.h)
// on AVX-512 builds and avx2:: (avx2_math.h) on AVX2 ones, whose rows share names and contracts
// (softmax_row, exp_shifted_row, gelu_row, gelu_grad_row, gelu_and_slope_row). Kernels outside
// simd/ reach them through float_rows.h, which every build declares.
#pragma once
#include "backends/cpu/simd/avx2_math.h"
#include "backends/cpu/simd/avx512_math.h"
#include "backends/cpu/simd/simd_lanes.h"

namespace mixlab::cpu {
#if defined(__AVX512F__)
namespace vector_math = avx512;
#elif defined(MIXLAB_EMULATE_LANES16) && defined(MIXLAB_HAS_LANES)
// A test build's 16 emulated lanes (lanes16_emulated.h): AVX2's rows, and its register functions
// on each half of a Lanes16 register.
namespace emulated16 {
using avx2::elu_plus_one_row;
using avx2::exp_shifted_row;
using avx2::gelu_and_slope_row;
using avx2::gelu_grad_row;
using avx2::gelu_row;
using avx2::softmax_row;
inline Lanes::V exp_of(Lanes::V x) { return {avx2::exp_of(x.lo), avx2::exp_of(x.hi)}; }
inline Lanes::V gelu_grad(Lanes::V x) { return {avx2::gelu_grad(x.lo), avx2::gelu_grad(x.hi)}; }
}  // namespace emulated16
namespace vector_math = emulated16;
#elif defined(MIXLAB_HAS_LANES)
namespace vector_math = avx2;
#endif
}  // namespace mixlab::cpu
