#include "train/run/float16.h"

#include <bit>
#include <cmath>

namespace mixlab {

uint16_t float_to_half(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exponent = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0));
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;  // the half's biased exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  // The kept bits, then round on the dropped ones: above half way up, exactly half way to even.
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  auto round = [](uint32_t kept, uint32_t dropped, uint32_t halfway) {
    return dropped > halfway || (dropped == halfway && (kept & 1u)) ? kept + 1 : kept;
  };
  if (e <= 0) {  // a subnormal half: m · 2^-24
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;  // the float's implicit leading 1
    const int shift = 14 - e;
    return static_cast<uint16_t>(
        sign | round(mantissa >> shift, mantissa & ((1u << shift) - 1), 1u << (shift - 1)));
  }
  const uint32_t kept = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  return static_cast<uint16_t>(sign | round(kept, mantissa & 0x1fffu, 0x1000u));
}

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: m · 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  const uint32_t wide_exponent = exponent == 31 ? 0xffu : exponent - 15 + 127;
  return std::bit_cast<float>(sign | (wide_exponent << 23) | (mantissa << 13));
}

}  // namespace mixlab
