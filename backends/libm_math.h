// The C++ library's transcendental functions, in the element's own type, as the policy the
// shared formulas take (backends/elementwise_ops.h, backends/fused_ops.h, backends/scan_ops.h):
// the reference backend's every function, and the CPU's wherever it has no faster one of its
// own (backends/cpu/cpu_math.h).
#pragma once
#include <cmath>

namespace mixlab {

struct LibmMath {
  template <typename T>
  static T exp(T x) {
    return std::exp(x);
  }
  template <typename T>
  static T log(T x) {
    return std::log(x);
  }
  template <typename T>
  static T sqrt(T x) {
    return std::sqrt(x);
  }
  template <typename T>
  static T tanh(T x) {
    return std::tanh(x);
  }
  template <typename T>
  static T erf(T x) {
    return std::erf(x);
  }
  template <typename T>
  static T pow(T x, T y) {
    return std::pow(x, y);
  }
  template <typename T>
  static T sin(T x) {
    return std::sin(x);
  }
  template <typename T>
  static T cos(T x) {
    return std::cos(x);
  }
};

}  // namespace mixlab
