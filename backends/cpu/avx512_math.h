// Float32 math in AVX-512 registers for the CPU kernels' hottest row loops: GELU (erf form)
// and its gradient (epilogue_row.h and the unary kernel), the softmax rows of the attention core
// (cpu_attention.cpp) and of the softmax kernel (cpu_rows.cpp), linear attention's elu + 1
// (the unary kernel, cpu_elementwise.cpp), the GLU gate's sigmoid and short outer products
// (cpu_fused.cpp).
//
// The generic loops compile (GCC 12, -march=native) to 256-bit vectors in which fast_expf's
// clamps and rounding become ~75 instructions per 8 elements: GELU's gradient cost 0.89 ns per
// element with its data in L1, the forward 0.34. Here the same rational function for erf
// (fast_math.h's coefficients, clamped with min/max) and an exp built on vrndscaleps/vscalefps
// (no integer conversion) take 16 elements per instruction. Values agree with the generic
// formulas to float32 rounding, not bit for bit (tests/test_ops_values.cpp); NaN propagates
// through every step.
#pragma once
#if defined(__AVX512F__)
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/fast_math.h"

// GCC 12 warns that the intrinsics' internal _mm512_undefined_ps() "may be used uninitialized"
// (GCC bug 105593, fixed in GCC 13); nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mixlab::cpu::avx512 {

// erf(z) for z clamped to [-4, 4]: fast_erff's odd/even rational function.
inline __m512 erf_of(__m512 z) {
  // max(-4, z) then min(4, ·), z as the second operand: a NaN z comes through as NaN.
  z = _mm512_min_ps(_mm512_set1_ps(4.0f), _mm512_max_ps(_mm512_set1_ps(-4.0f), z));
  const __m512 z2 = _mm512_mul_ps(z, z);
  __m512 p = _mm512_set1_ps(kErfNumerator[0]);
  for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, z2, _mm512_set1_ps(kErfNumerator[i]));
  p = _mm512_mul_ps(p, z);
  __m512 q = _mm512_set1_ps(kErfDenominator[0]);
  for (int i = 1; i < 5; ++i) q = _mm512_fmadd_ps(q, z2, _mm512_set1_ps(kErfDenominator[i]));
  // p / q as p · (1/q): vrcp14ps's estimate and one Newton step (relative error about 2⁻²⁸
  // before rounding). A 512-bit division was the loop's bottleneck: 0.44 ns per element of the
  // 0.61 GELU cost. q lies in [-2.4, -0.014] for every z, so the estimate is never 0 or ∞.
  const __m512 r0 = _mm512_rcp14_ps(q);
  const __m512 r = _mm512_mul_ps(r0, _mm512_fnmadd_ps(q, r0, _mm512_set1_ps(2.0f)));
  // At the clamp, exactly ±1 (z/4): the rational function gives 1 - 6e-8 there, and gelu(x)
  // would keep a tail of -x·4e-9 for every x below -5.7 instead of 0.
  const __mmask16 saturated =
      _mm512_cmp_ps_mask(_mm512_abs_ps(z), _mm512_set1_ps(4.0f), _CMP_EQ_OQ);
  return _mm512_mask_mul_ps(_mm512_mul_ps(p, r), saturated, z, _mm512_set1_ps(0.25f));
}

// exp(y) for y ≤ 88: y = n·ln2 + r with n = round(y·log2 e), exp(r) by fast_expf's degree-6
// polynomial, then ·2ⁿ by vscalefps, which underflows to 0 by itself. y is clamped below at
// -104 (exp is 0 there in float32) so that -∞ gives 0 rather than ∞ - ∞.
inline __m512 exp_of(__m512 y) {
  y = _mm512_max_ps(_mm512_set1_ps(-104.0f), y);  // y second: a NaN y stays NaN
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), y);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(kExpTaylor[0]);
  for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpTaylor[i]));
  return _mm512_scalef_ps(p, n);
}

// erf(x/√2), which GELU and its gradient share.
inline __m512 erf_over_sqrt2(__m512 x) {
  return erf_of(_mm512_mul_ps(x, _mm512_set1_ps(0.7071067811865476f)));
}

// gelu(x) = x·Φ(x) = 0.5·x·(1 + erf(x/√2)), e = erf_over_sqrt2(x).
inline __m512 gelu_given_erf(__m512 x, __m512 e) {
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x),
                       _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}
inline __m512 gelu(__m512 x) { return gelu_given_erf(x, erf_over_sqrt2(x)); }

// gelu'(x) = Φ(x) + x·φ(x), e = erf_over_sqrt2(x). x·φ(x) is taken at x clamped to [-10, 10]:
// beyond, it is below 1e-20 (and an infinite x would make it ∞·0).
inline __m512 gelu_grad_given_erf(__m512 x, __m512 e) {
  const __m512 cdf = _mm512_fmadd_ps(_mm512_set1_ps(0.5f), e, _mm512_set1_ps(0.5f));
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(10.0f), _mm512_max_ps(_mm512_set1_ps(-10.0f), x));
  const __m512 pdf = exp_of(_mm512_mul_ps(_mm512_set1_ps(-0.5f), _mm512_mul_ps(xc, xc)));
  return _mm512_fmadd_ps(_mm512_mul_ps(xc, _mm512_set1_ps(0.3989422804014327f)), pdf, cdf);
}
inline __m512 gelu_grad(__m512 x) { return gelu_grad_given_erf(x, erf_over_sqrt2(x)); }

// Lanes [0, left) of a 16-lane register, for a row's last partial vector.
inline __mmask16 first_lanes(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}

// The lanes of keys [i, i + 16) of a row of m that exist and are allowed (`allowed`: a row of
// m floats, nonzero = allowed; null: every key).
inline __mmask16 allowed_lanes(const float* allowed, int64_t i, int64_t m) {
  const __mmask16 k = first_lanes(m - i);
  return allowed ? _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, allowed + i),
                                           _mm512_setzero_ps(), _CMP_NEQ_UQ)
                 : k;
}

// One row of a batch of outer products, q ≤ 16: out [p, q] = x[u] · y[v], y in one register and
// a masked store per u (the generic loop of 7 ran scalar).
inline void outer_row(const float* x, const float* y, float* out, int64_t p, int64_t q) {
  const __mmask16 k = first_lanes(q);
  const __m512 yv = _mm512_maskz_loadu_ps(k, y);
  for (int64_t u = 0; u < p; ++u)
    _mm512_mask_storeu_ps(out + u * q, k, _mm512_mul_ps(_mm512_set1_ps(x[u]), yv));
}

// Its gradients for one row, q ≤ 16: dx[u] = Σ_v g[u, v] y[v] (a lane sum per u) and dy[v] =
// Σ_u g[u, v] x[u] (one register, summed in u's order).
inline void outer_grad_row(const float* x, const float* y, const float* g, float* dx, float* dy,
                           int64_t p, int64_t q) {
  const __mmask16 k = first_lanes(q);
  const __m512 yv = _mm512_maskz_loadu_ps(k, y);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t u = 0; u < p; ++u) {
    const __m512 gu = _mm512_maskz_loadu_ps(k, g + u * q);
    acc = _mm512_fmadd_ps(gu, _mm512_set1_ps(x[u]), acc);
    dx[u] = _mm512_reduce_add_ps(_mm512_mul_ps(gu, yv));
  }
  _mm512_mask_storeu_ps(dy, k, acc);
}

// y = gelu(pre) over cols floats.
inline void gelu_row(const float* pre, float* y, int64_t cols) {
  for (int64_t i = 0; i < cols; i += 16) {
    const __mmask16 m = first_lanes(cols - i);
    _mm512_mask_storeu_ps(y + i, m, gelu(_mm512_maskz_loadu_ps(m, pre + i)));
  }
}

// y = gelu(x) and slope = gelu'(x) over cols floats, erf taken once for both (slope may be x).
// stream_slope (slope on a cache line, not x): the slope's whole registers go out as streaming
// stores, which write memory without reading the lines first or keeping them in cache (for a
// result read long after, by the backward).
inline void gelu_and_slope_row(const float* x, float* y, float* slope, int64_t cols,
                               bool stream_slope = false) {
  int64_t i = 0;
  if (stream_slope)
    for (; i + 16 <= cols; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i), e = erf_over_sqrt2(v);
      _mm512_storeu_ps(y + i, gelu_given_erf(v, e));
      _mm512_stream_ps(slope + i, gelu_grad_given_erf(v, e));
    }
  for (; i < cols; i += 16) {
    const __mmask16 m = first_lanes(cols - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i), e = erf_over_sqrt2(v);
    _mm512_mask_storeu_ps(y + i, m, gelu_given_erf(v, e));
    _mm512_mask_storeu_ps(slope + i, m, gelu_grad_given_erf(v, e));
  }
}

// dx = dy · gelu'(pre) over cols floats (dx may be dy).
inline void gelu_grad_row(const float* dy, const float* pre, float* dx, int64_t cols) {
  for (int64_t i = 0; i < cols; i += 16) {
    const __mmask16 m = first_lanes(cols - i);
    const __m512 g = gelu_grad(_mm512_maskz_loadu_ps(m, pre + i));
    _mm512_mask_storeu_ps(dx + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), g));
  }
}

// elu(x) + 1 = (x > 0 ? x : 0) + exp(x < 0 ? x : 0), and its gradient exp(x < 0 ? x : 0) (1 above
// 0), over n floats: linear attention's feature map. The selects are the scalar formula's
// (elementwise_ops.h), NaN included (it gives 1 there, on both).
inline void elu_plus_one_row(const float* x, float* y, int64_t n, bool gradient) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first_lanes(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    const __m512 e = exp_of(_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v));
    const __m512 out =
        gradient
            ? e
            : _mm512_add_ps(_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v), e);
    _mm512_mask_storeu_ps(y + i, k, out);
  }
}

// σ(b) = 1 / (1 + exp(−b)), with −b clamped at 88 (exp's range here; σ is then below 1e-38 and
// rounds as the scalar formula's tiny value does). NaN stays NaN (vminps returns its second
// operand, −b, when it is NaN).
inline __m512 sigmoid(__m512 b) {
  const __m512 e =
      exp_of(_mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_sub_ps(_mm512_setzero_ps(), b)));
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// GLU over a row: out = a · σ(b) (fused::glu), n floats each.
inline void glu_row(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first_lanes(n - i);
    _mm512_mask_storeu_ps(
        out + i, k,
        _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a + i), sigmoid(_mm512_maskz_loadu_ps(k, b + i))));
  }
}

// GLU's gradients over a row (fused::glu_grad): da = g·σ(b), db = (g·a)·(σ·(1 − σ)).
inline void glu_grad_row(const float* g, const float* a, const float* b, float* da, float* db,
                         int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first_lanes(n - i);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
    const __m512 s = sigmoid(_mm512_maskz_loadu_ps(k, b + i));
    _mm512_mask_storeu_ps(da + i, k, _mm512_mul_ps(gv, s));
    const __m512 ga = _mm512_mul_ps(gv, _mm512_maskz_loadu_ps(k, a + i));
    _mm512_mask_storeu_ps(db + i, k, _mm512_mul_ps(ga, _mm512_mul_ps(s, _mm512_sub_ps(one, s))));
  }
}

// The softmax of a row x of m scores, written to s (which may be x), over the keys `allowed`
// marks (a row of m floats, nonzero = allowed; null: every key); the others get probability 0.
// Returns the row's log-sum-exp, -inf (and a row of zeros) when no key is allowed. The maximum
// skips NaN as row_max.h's does (vmaxps returns its second operand when one is NaN).
inline float softmax_row(const float* x, float* s, int64_t m, const float* allowed = nullptr) {
  const __m512 none = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 hi = none;
  for (int64_t i = 0; i < m; i += 16)
    hi = _mm512_max_ps(_mm512_mask_loadu_ps(none, allowed_lanes(allowed, i, m), x + i), hi);
  const float top = _mm512_reduce_max_ps(hi);
  if (allowed && top == -std::numeric_limits<float>::infinity()) {  // no key allowed
    for (int64_t i = 0; i < m; i += 16)
      _mm512_mask_storeu_ps(s + i, first_lanes(m - i), _mm512_setzero_ps());
    return top;
  }
  const __m512 top_v = _mm512_set1_ps(top);
  __m512 total_v = _mm512_setzero_ps();
  for (int64_t i = 0; i < m; i += 16) {
    const __m512 e = _mm512_maskz_mov_ps(
        allowed_lanes(allowed, i, m),
        exp_of(_mm512_sub_ps(_mm512_maskz_loadu_ps(first_lanes(m - i), x + i), top_v)));
    _mm512_mask_storeu_ps(s + i, first_lanes(m - i), e);
    total_v = _mm512_add_ps(total_v, e);
  }
  const float total = _mm512_reduce_add_ps(total_v);
  const __m512 inv = _mm512_set1_ps(1.0f / total);
  for (int64_t i = 0; i < m; i += 16) {
    const __mmask16 k = first_lanes(m - i);
    _mm512_mask_storeu_ps(s + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + i), inv));
  }
  return top + std::log(total);
}

// s = exp(s - shift) over a row of m floats, 0 where `allowed` (null: every key) is 0: the
// softmax again from a saved log-sum-exp.
inline void exp_shifted_row(float* s, int64_t m, float shift, const float* allowed = nullptr) {
  const __m512 shift_v = _mm512_set1_ps(shift);
  for (int64_t i = 0; i < m; i += 16) {
    const __mmask16 k = first_lanes(m - i);
    const __m512 e = exp_of(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), shift_v));
    _mm512_mask_storeu_ps(s + i, k, _mm512_maskz_mov_ps(allowed_lanes(allowed, i, m), e));
  }
}

}  // namespace mixlab::cpu::avx512

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
