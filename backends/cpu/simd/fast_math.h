// Float32 exp and erf as plain arithmetic (no libm calls), so the compiler vectorises the loops
// that use them: GELU, softmax, sigmoid and cross-entropy spent most of their time in scalar
// libm calls. Accuracy is at float32's own level (tested against libm in
// tests/test_ops_values.cpp); float64 kernels keep using libm.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mixlab::cpu {

// The polynomials' coefficients, highest power first (Horner's rule: c[0]·t + c[1], then · t +
// c[2], …), shared with the vector forms in avx2_math.h and avx512_math.h.
// exp(r) on |r| ≤ ln2/2: its degree-6 Taylor polynomial.
inline constexpr float kExpTaylor[7] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f,
                                        0.5f,          1.0f,          1.0f};
// erf(x) = x·P(x²) / Q(x²) on [-4, 4]: the minimax fit used by Eigen and XLA for float32 erf.
inline constexpr float kErfNumerator[7] = {
    -2.72614225801306e-10f, 2.77068142495902e-08f,  -2.10102402082508e-06f, -5.69250639462346e-05f,
    -7.34990630326855e-04f, -2.95459980854025e-03f, -1.60960333262415e-02f};
inline constexpr float kErfDenominator[5] = {-1.45660718464996e-05f, -2.13374055278905e-04f,
                                             -1.68282697438203e-03f, -7.37332916720468e-03f,
                                             -1.42647390514189e-02f};
// The standard normal's upper tail for AVX-512's GELU (avx512_math.h's normal_cdf):
// ½·erfc(a/√2) ≈ t·P(t)·exp(-a²/2) for a ≥ 0, t = 1/(1 + kNormalTailP·a), Abramowitz & Stegun
// 7.1.26 (|error| ≤ 1.5e-7 in erf) with its argument scaled by 1/√2 and its P halved.
inline constexpr float kNormalTailP = static_cast<float>(0.3275911 * 0.7071067811865476);
inline constexpr float kNormalTail[5] = {0.5f * 1.061405429f, 0.5f * -1.453152027f,
                                         0.5f * 1.421413741f, 0.5f * -0.284496736f,
                                         0.5f * 0.254829592f};

// exp(x): x = n·ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact n·ln2), exp(r) by its
// degree-6 Taylor polynomial (relative error < 2e-7 there), times 2^n in two steps: p·2^(n/2)
// by adding n/2 to p's exponent bits (exact: the result is a normal float for every n in
// [-150, 128]), then one float product with 2^(n-n/2). That product alone rounds: below
// exp(-87.3) the result underflows as libm's does, through the subnormals to exactly 0, and above
// exp(88.72) it overflows to +inf (x is clamped to [-104, 89], so n stays in that range). A
// product of three floats would not do: the CPU kernels' -fassociative-math may multiply the two
// powers of two first, and 2^128 is already +inf (exp(88.5) would be infinite).
// NaN propagates as NaN through the arithmetic; only the value converted to an integer is swapped
// for 0 (converting NaN to int32_t is undefined behaviour), so n = 0 and p's NaN bits are left
// as they are. That is one select and no select at the end: GCC turns a pair of selects on the
// same condition into a branch, and the loops that call this would no longer vectorise (seen
// with AVX-512 targets).
inline float fast_expf(float x) {
  float c = x < -104.0f ? -104.0f : x;  // NaN compares false and stays NaN
  c = c > 89.0f ? 89.0f : c;
  float t = c * 1.44269504088896341f;
  t = c != c ? 0.0f : t;
  int32_t n = static_cast<int32_t>(t + (t >= 0.0f ? 0.5f : -0.5f));
  float fn = static_cast<float>(n);
  float r = c - fn * 0.693145751953125f - fn * 1.428606765330187e-06f;
  float p = kExpTaylor[0];
  for (int i = 1; i < 7; ++i) p = p * r + kExpTaylor[i];
  int32_t half = n >> 1;  // floor(n / 2): n - half is within one of it
  int32_t p_bits, bits_high = (n - half + 127) << 23;
  std::memcpy(&p_bits, &p, sizeof p);
  p_bits += half * (1 << 23);  // p · 2^half, exactly
  float low_scaled, high;
  std::memcpy(&low_scaled, &p_bits, sizeof low_scaled);
  std::memcpy(&high, &bits_high, sizeof high);
  return low_scaled * high;
}

// erf(x) as an odd/even rational function on [-4, 4] (beyond it erf is ±1 in float32):
// kErfNumerator, kErfDenominator.
inline float fast_erff(float x) {
  x = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
  float x2 = x * x;
  float p = kErfNumerator[0];
  for (int i = 1; i < 7; ++i) p = p * x2 + kErfNumerator[i];
  p = p * x;
  float q = kErfDenominator[0];
  for (int i = 1; i < 5; ++i) q = q * x2 + kErfDenominator[i];
  return p / q;
}

// The same names for double forward to libm, so kernels can be written once for both types.
inline float exp_of(float x) { return fast_expf(x); }
inline double exp_of(double x) { return std::exp(x); }
inline float erf_of(float x) { return fast_erff(x); }
inline double erf_of(double x) { return std::erf(x); }

}  // namespace mixlab::cpu
