// Float32 math in AVX2 registers for builds without AVX-512 (avx512_math.h has the same rows in
// 512-bit registers): the softmax rows of the attention core (attention_item.h) and GELU and its
// gradient (epilogue_row.h: a linear layer's bias + GELU).
//
// Why: the generic loops vectorise 8 wide, but fast_expf's clamps, rounding and exponent bits
// become ~75 instructions per 8 elements, and a short row (the translator's 12 keys) runs mostly
// in the scalar remainder. Here exp is fast_expf's formula lane by lane (the same clamp at -104
// and 88, the same degree-6 polynomial, the same 2ⁿ in two factors so that it underflows
// through the subnormals as libm's does) and erf fast_erff's rational function. Values agree
// with the generic formulas to float32 rounding, not bit for bit (tests/test_ops_values.cpp);
// NaN propagates through every step.
#pragma once
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/simd/simd_lanes.h"

namespace mixlab::cpu::avx2 {

using L = Lanes256;

// p[0, left) into a register (0 in the lanes beyond), and back (simd_lanes.h: a plain load or
// store when all 8 lanes are in).
inline __m256 load_first(const float* p, int64_t left) { return L::load(p, L::first(left)); }
inline void store_first(float* p, int64_t left, __m256 v) { L::store(p, L::first(left), v); }

// The lanes of keys [i, i + 8) of a row of m that exist and are allowed (`allowed`: a row of
// m floats, nonzero = allowed; null: every key), as a mask of all-ones lanes.
inline __m256 allowed_lanes(const float* allowed, int64_t i, int64_t m) {
  if (!allowed) return _mm256_castsi256_ps(L::first(m - i).bits);
  const __m256 marks = load_first(allowed + i, m - i);  // 0 past m
  return _mm256_cmp_ps(marks, _mm256_setzero_ps(), _CMP_NEQ_UQ);
}

// exp(y) = 2ⁿ · p(r): n = round(y / ln 2) is returned in `n`, and p(r), r = y - n·ln 2 (ln 2 in
// two parts), the degree-6 polynomial of fast_expf (fast_math.h), is the result.
inline __m256 exp_reduced(__m256 y, __m256i& n) {
  const __m256 nf = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(0.693145751953125f), y);
  r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(kExpTaylor[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpTaylor[i]));
  n = _mm256_cvtps_epi32(nf);  // a NaN y converts to INT_MIN; p is then NaN
  return p;
}

// 2ⁿ for n in [-126, 127], from its exponent bits.
inline __m256 power_of_two(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

// exp(y) for y ≤ 88, fast_expf's value in 8 lanes; its callers pass shifted logits and -x²/2,
// never more than 0. Above 88 it gives exp(88), where fast_expf overflows to +inf.
inline __m256 exp_of(__m256 y) {
  // max(-104, y) then min(88, ·), y second: vmaxps/vminps return it when it is NaN.
  y = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), y));
  __m256i n;
  const __m256 p = exp_reduced(y, n);
  // 2ⁿ as 2^⌊n/2⌋ · 2^(n-⌊n/2⌋), both normal for n in [-150, 127], so that exp underflows
  // through the subnormals as libm's does. For a NaN y the factors are garbage, and p (NaN)
  // makes the product NaN.
  const __m256i half = _mm256_srai_epi32(n, 1);
  return _mm256_mul_ps(_mm256_mul_ps(p, power_of_two(half)),
                       power_of_two(_mm256_sub_epi32(n, half)));
}

// exp(y) for y in [-87, 88], where 2ⁿ is a normal float: exp_of without its clamp, and 2ⁿ in
// one factor. Both of exp_of's factors are powers of two and p·2ⁿ stays normal there, so every
// step is exact and this gives exp_of's bits with 7 fewer of its ~27 instructions (GELU's slope,
// whose argument -x²/2 is in [-50, 0], takes 17% less time).
inline __m256 exp_of_normal_range(__m256 y) {
  __m256i n;
  const __m256 p = exp_reduced(y, n);
  return _mm256_mul_ps(p, power_of_two(n));
}

// The softmax of a row x of m scores, written to s (which may be x), over the keys `allowed`
// marks (a row of m floats, nonzero = allowed; null: every key); the others get probability 0.
// Returns the row's log-sum-exp, -inf (and a row of zeros) when no key is allowed. The maximum
// skips NaN as row_max.h's does (vmaxps returns its second operand when one is NaN).
inline float softmax_row(const float* x, float* s, int64_t m, const float* allowed = nullptr) {
  const __m256 none = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 hi = none;
  for (int64_t i = 0; i < m; i += 8) {
    const __m256 v = load_first(x + i, m - i);
    hi = _mm256_max_ps(_mm256_blendv_ps(none, v, allowed_lanes(allowed, i, m)), hi);
  }
  const float top = L::max_of(hi);
  if (allowed && top == -std::numeric_limits<float>::infinity()) {  // no key allowed
    for (int64_t i = 0; i < m; i += 8) store_first(s + i, m - i, _mm256_setzero_ps());
    return top;
  }
  const __m256 top_v = _mm256_set1_ps(top);
  __m256 total_v = _mm256_setzero_ps();
  for (int64_t i = 0; i < m; i += 8) {
    const __m256 e = _mm256_and_ps(allowed_lanes(allowed, i, m),
                                   exp_of(_mm256_sub_ps(load_first(x + i, m - i), top_v)));
    store_first(s + i, m - i, e);
    total_v = _mm256_add_ps(total_v, e);
  }
  const float total = L::sum(total_v);
  const __m256 inv = _mm256_set1_ps(1.0f / total);
  for (int64_t i = 0; i < m; i += 8)
    store_first(s + i, m - i, _mm256_mul_ps(load_first(s + i, m - i), inv));
  return top + std::log(total);
}

// s = exp(s - shift) over a row of m floats, 0 where `allowed` (null: every key) is 0: the
// softmax again from a saved log-sum-exp.
inline void exp_shifted_row(float* s, int64_t m, float shift, const float* allowed = nullptr) {
  const __m256 shift_v = _mm256_set1_ps(shift);
  for (int64_t i = 0; i < m; i += 8) {
    const __m256 e = exp_of(_mm256_sub_ps(load_first(s + i, m - i), shift_v));
    store_first(s + i, m - i, _mm256_and_ps(allowed_lanes(allowed, i, m), e));
  }
}

// erf(z) for z clamped to [-4, 4]: fast_erff's odd/even rational function (a true division:
// vrcpps's 12-bit estimate would need two Newton steps to match it).
inline __m256 erf_of(__m256 z) {
  // max(-4, z) then min(4, ·), z second: a NaN z comes through as NaN.
  z = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_max_ps(_mm256_set1_ps(-4.0f), z));
  const __m256 z2 = _mm256_mul_ps(z, z);
  __m256 p = _mm256_set1_ps(kErfNumerator[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(kErfNumerator[i]));
  p = _mm256_mul_ps(p, z);
  __m256 q = _mm256_set1_ps(kErfDenominator[0]);
  for (int i = 1; i < 5; ++i) q = _mm256_fmadd_ps(q, z2, _mm256_set1_ps(kErfDenominator[i]));
  // At the clamp, exactly ±1 (z/4), as avx512_math.h's: the rational function gives 1 - 6e-8
  // there, and gelu(x) would keep a tail of -x·4e-9 for every x below -5.7 instead of 0.
  const __m256 abs_z = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 saturated = _mm256_cmp_ps(abs_z, _mm256_set1_ps(4.0f), _CMP_EQ_OQ);
  return _mm256_blendv_ps(_mm256_div_ps(p, q), _mm256_mul_ps(z, _mm256_set1_ps(0.25f)), saturated);
}

// erf(x/√2), which GELU and its gradient share.
inline __m256 erf_over_sqrt2(__m256 x) {
  return erf_of(_mm256_mul_ps(x, _mm256_set1_ps(0.7071067811865476f)));
}

// gelu(x) = 0.5·x·(1 + erf(x/√2)), e = erf_over_sqrt2(x).
inline __m256 gelu_given_erf(__m256 x, __m256 e) {
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                       _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// gelu'(x) = Φ(x) + x·φ(x), e = erf_over_sqrt2(x); x·φ(x) at x clamped to [-10, 10] (beyond, it
// is below 1e-20, and an infinite x would make it ∞·0).
inline __m256 gelu_grad_given_erf(__m256 x, __m256 e) {
  const __m256 cdf = _mm256_fmadd_ps(_mm256_set1_ps(0.5f), e, _mm256_set1_ps(0.5f));
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(10.0f), _mm256_max_ps(_mm256_set1_ps(-10.0f), x));
  const __m256 pdf =
      exp_of_normal_range(_mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(xc, xc)));
  return _mm256_fmadd_ps(_mm256_mul_ps(xc, _mm256_set1_ps(0.3989422804014327f)), pdf, cdf);
}

// y = gelu(pre) over cols floats.
inline void gelu_row(const float* pre, float* y, int64_t cols) {
  for (int64_t i = 0; i < cols; i += 8) {
    const __m256 x = load_first(pre + i, cols - i);
    store_first(y + i, cols - i, gelu_given_erf(x, erf_over_sqrt2(x)));
  }
}

// y = gelu(x) and slope = gelu'(x) over cols floats, erf taken once for both (slope may be x).
// stream_slope (slope on 32 bytes, not x): the slope's whole registers go out as streaming
// stores (read only by the backward, long after: no read of its lines first, no cache filled).
inline void gelu_and_slope_row(const float* x, float* y, float* slope, int64_t cols,
                               bool stream_slope = false) {
  for (int64_t i = 0; i < cols; i += 8) {
    const __m256 v = load_first(x + i, cols - i), e = erf_over_sqrt2(v);
    store_first(y + i, cols - i, gelu_given_erf(v, e));
    const __m256 g = gelu_grad_given_erf(v, e);
    if (stream_slope && i + 8 <= cols)
      _mm256_stream_ps(slope + i, g);
    else
      store_first(slope + i, cols - i, g);
  }
}

// dx = dy · gelu'(pre) over cols floats (dx may be dy).
inline void gelu_grad_row(const float* dy, const float* pre, float* dx, int64_t cols) {
  for (int64_t i = 0; i < cols; i += 8) {
    const __m256 x = load_first(pre + i, cols - i);
    const __m256 g = gelu_grad_given_erf(x, erf_over_sqrt2(x));
    store_first(dx + i, cols - i, _mm256_mul_ps(load_first(dy + i, cols - i), g));
  }
}

// gelu'(x) in 8 lanes.
inline __m256 gelu_grad(__m256 x) { return gelu_grad_given_erf(x, erf_over_sqrt2(x)); }

// y = elu(x) + 1 (gradient: its derivative) over n floats: relu(x) + exp(min(x, 0)), the
// derivative exp(min(x, 0)), as the scalar formula (elementwise_ops.h) computes them, with
// exp_of's bits; NaN is neither above nor below 0 and gives 1.
inline void elu_plus_one_row(const float* x, float* y, int64_t n, bool gradient) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = load_first(x + i, n - i);
    const __m256 e = exp_of(_mm256_and_ps(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), v));
    const __m256 out =
        gradient ? e : _mm256_add_ps(_mm256_and_ps(_mm256_cmp_ps(v, zero, _CMP_GT_OQ), v), e);
    store_first(y + i, n - i, out);
  }
}

}  // namespace mixlab::cpu::avx2
#endif
