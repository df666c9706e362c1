// The CPU's transcendental functions as the policy the shared formulas take (backends/
// elementwise_ops.h, backends/fused_ops.h): used by cpu_elementwise.cpp and cpu_fused.cpp, so
// fused and unfused ops evaluate them with the same code.
#pragma once
#include <cmath>

#include "backends/cpu/simd/fast_math.h"
#include "backends/libm_math.h"

namespace mixlab {

// The CPU's transcendental functions for the shared formulas (backends/elementwise_ops.h): the
// vectorisable float polynomials of fast_math.h for exp and erf, libm for the rest (LibmMath).
struct CpuMath : LibmMath {
  template <typename T>
  static T exp(T x) {
    return cpu::exp_of(x);
  }
  template <typename T>
  static T erf(T x) {
    return cpu::erf_of(x);
  }
};

}  // namespace mixlab
