// Which vector registers this build's CPU kernels were compiled for (MIXLAB_NATIVE: the building
// machine's), asked at run time by code compiled without those flags: `mixlab --version` reports
// it (speed numbers depend on it), and the tests use it to know whether the register kernels
// (simd_lanes.h) must have been taken.
#pragma once

namespace mixlab::cpu {

// "AVX-512", "AVX2" (with FMA), or "generic" (neither: OpenBLAS and plain loops only).
const char* kernel_registers();

}  // namespace mixlab::cpu
