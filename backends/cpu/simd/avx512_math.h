// Float32 math in AVX-512 registers for the CPU kernels' hottest row loops: GELU (erf form)
// and its gradient (epilogue_row.h and the unary kernel), the softmax rows of the attention core
// (cpu_attention.cpp) and of the softmax kernel (cpu_rows.cpp), linear attention's elu + 1
// (the unary kernel, cpu_elementwise.cpp), the GLU gate's sigmoid and short outer products
// (cpu_fused.cpp).
//
// The generic loops compile (GCC 12, -march=native) to 256-bit vectors in which fast_expf's
// clamps and rounding become ~75 instructions per 8 elements: GELU's gradient cost 0.89 ns per
// element with its data in L1, the forward 0.34. Here an exp built on vrndscaleps/vscalefps
// (no integer conversion) and the normal distribution's tail as a polynomial times that exp
// (normal_cdf below; fast_math.h's coefficients) take 16 elements per instruction. Values agree
// with libm to float32's level, not bit for bit with the generic formulas
// (tests/test_ops_values.cpp); NaN propagates through every step.
#pragma once
#if defined(__AVX512F__)
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/simd/fast_math.h"

// GCC 12 warns that the intrinsics' internal _mm512_undefined_ps() "may be used uninitialized"
// (GCC bug 105593, fixed in GCC 13); nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mixlab::cpu::avx512 {

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

// Φ(x), the standard normal's distribution function, and e = exp(-x²/2), which GELU and its
// gradient share: Φ(x) = 1 - h for x ≥ 0 and h below, h = ½·erfc(|x|/√2) ≈ t·P(t)·e
// (fast_math.h's kNormalTail). The exp is the normal density's own, so GELU and its slope take
// one exp and a degree-5 polynomial where erf's rational function (7 + 5 coefficients and a
// division) and the density's exp took both: the pair costs a quarter less (Zen 4, in L1), where
// GELU's epilogue is 2.5-7.5% of the classifiers' steps. In AVX2 registers the same form is
// slower than erf's (GELU alone needs no exp there), so avx2_math.h keeps erf. Taken as a term of
// its own, h keeps its relative accuracy in the left tail, where 1 + erf(x/√2) lost it all (that
// form was exactly 0 below x = -5.66; -6 gives gelu -5.9e-9 now, as libm's erfc does).
inline __m512 normal_cdf(__m512 x, __m512& e) {
  e = exp_of(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), x), x));  // 0 below -104
  // |x| at most 20, so that ±∞ gives t = 1/21, not 1/∞ (whose Newton step is ∞·0); e is 0 there.
  // min(20, |x|) with |x| second: a NaN x stays NaN.
  const __m512 a = _mm512_min_ps(_mm512_set1_ps(20.0f), _mm512_abs_ps(x));
  const __m512 d = _mm512_fmadd_ps(a, _mm512_set1_ps(kNormalTailP), _mm512_set1_ps(1.0f));
  // 1/d by vrcp14ps's estimate and one Newton step (d ≥ 1: never 0 or ∞).
  const __m512 r0 = _mm512_rcp14_ps(d);
  const __m512 t = _mm512_mul_ps(r0, _mm512_fnmadd_ps(d, r0, _mm512_set1_ps(2.0f)));
  __m512 p = _mm512_set1_ps(kNormalTail[0]);
  for (int i = 1; i < 5; ++i) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kNormalTail[i]));
  const __m512 h = _mm512_mul_ps(_mm512_mul_ps(p, t), e);
  const __mmask16 right = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);  // NaN: h
  return _mm512_mask_sub_ps(h, right, _mm512_set1_ps(1.0f), h);
}

// gelu(x) = x·Φ(x), cdf = normal_cdf(x, ·).
inline __m512 gelu_given_cdf(__m512 x, __m512 cdf) { return _mm512_mul_ps(x, cdf); }
inline __m512 gelu(__m512 x) {
  __m512 e;
  return gelu_given_cdf(x, normal_cdf(x, e));
}

// gelu'(x) = Φ(x) + x·φ(x), φ(x) = e/√(2π), with cdf and e from normal_cdf(x, e). x is clamped
// to [-10, 10] in x·φ(x): beyond, e is below 1e-21, and an infinite x would make it ∞·0.
inline __m512 gelu_grad_given_cdf(__m512 x, __m512 cdf, __m512 e) {
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(10.0f), _mm512_max_ps(_mm512_set1_ps(-10.0f), x));
  return _mm512_fmadd_ps(_mm512_mul_ps(xc, _mm512_set1_ps(0.3989422804014327f)), e, cdf);
}
inline __m512 gelu_grad(__m512 x) {
  __m512 e;
  const __m512 cdf = normal_cdf(x, e);
  return gelu_grad_given_cdf(x, cdf, e);
}

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

// y = gelu(x) and slope = gelu'(x) over cols floats, Φ and e taken once for both (slope may be
// x).
// stream_slope (slope on a cache line, not x): the slope's whole registers go out as streaming
// stores, which write memory without reading the lines first or keeping them in cache (for a
// result read long after, by the backward).
inline void gelu_and_slope_row(const float* x, float* y, float* slope, int64_t cols,
                               bool stream_slope = false) {
  int64_t i = 0;
  if (stream_slope)
    for (; i + 16 <= cols; i += 16) {
      __m512 e;
      const __m512 v = _mm512_loadu_ps(x + i), cdf = normal_cdf(v, e);
      _mm512_storeu_ps(y + i, gelu_given_cdf(v, cdf));
      _mm512_stream_ps(slope + i, gelu_grad_given_cdf(v, cdf, e));
    }
  for (; i < cols; i += 16) {
    const __mmask16 m = first_lanes(cols - i);
    __m512 e;
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i), cdf = normal_cdf(v, e);
    _mm512_mask_storeu_ps(y + i, m, gelu_given_cdf(v, cdf));
    _mm512_mask_storeu_ps(slope + i, m, gelu_grad_given_cdf(v, cdf, e));
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
