// IEEE 754 binary16 ("half", safetensors' F16) to and from float, for weights exported at half
// the size (`mixlab export --dtype f16`). The engine computes in F32/F64 only: F16 exists on disk,
// and loading widens it back to F32 (exactly: every half is a float).
#pragma once
#include <cstdint>

namespace mixlab {

// Round to nearest, ties to even, as a hardware conversion does; finite floats beyond the half
// range (|x| >= 65520) become ±infinity, those below 2^-25 become ±0; NaN stays NaN.
uint16_t float_to_half(float value);
float half_to_float(uint16_t bits);

}  // namespace mixlab
