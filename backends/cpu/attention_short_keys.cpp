// The attention core for items of at most 16 keys, in AVX-512 registers (attention_short_keys.h).
//
// Why: the translator's heads are 11-12 tokens of 32 features, and cblas on such a block costs
// mostly its call: a [12, 32] x [32, 12] product is 4,608 multiply-adds, 288 register FMAs, and
// OpenBLAS's small-matrix path took about 400 ns for it (the backward makes five per item). Here a
// row of scores is one register: lane j holds key j. Keys' columns are transposed into registers
// once per item (kᵀ and vᵀ as [cols, 16], zero beyond the m keys), so
//   - a row of scores (q kᵀ, or dout vᵀ in the backward) is cols broadcast-FMAs into one
//     register, for 8 rows at once (8 independent chains keep both FMA ports busy);
//   - softmax, mask and log-sum-exp are lane operations on that register;
//   - weighted sums of key rows (P v, dS k) and of query rows (Pᵀ dout, dSᵀ q) broadcast one
//     weight at a time against rows of 16 features, again 8 output rows at once.
// Every sum runs in a fixed order whatever the thread count (one item on one thread).
#include "backends/cpu/attention_short_keys.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/avx512_math.h"
#endif

namespace mixlab::cpu {

bool short_keys_fit(int64_t m, int64_t d, int64_t e, const MaskRows<float>& mask) {
#if defined(__AVX512F__)
  return m >= 1 && m <= 16 && d >= 1 && e >= 1 && (!mask.data || mask.col == 1);
#else
  (void)m, (void)d, (void)e, (void)mask;
  return false;
#endif
}

#if defined(__AVX512F__)
// GCC 12 warns that the reductions' internal _mm256_undefined_pd() is used uninitialized (GCC
// bug 105593, fixed in GCC 13), as in avx512_math.h; nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

using avx512::allowed_lanes;
using avx512::first_lanes;

// Rows (queries, or keys) handled together: 8 independent accumulator chains.
constexpr int kGroup = 8;

// Calls f(std::integral_constant<int, R>{}, first) over [0, count) in groups of R ≤ kGroup.
template <typename F>
void in_groups(int64_t count, F&& f) {
  int64_t i = 0;
  for (; i + kGroup <= count; i += kGroup) f(std::integral_constant<int, kGroup>{}, i);
  switch (count - i) {
    case 7:
      return f(std::integral_constant<int, 7>{}, i);
    case 6:
      return f(std::integral_constant<int, 6>{}, i);
    case 5:
      return f(std::integral_constant<int, 5>{}, i);
    case 4:
      return f(std::integral_constant<int, 4>{}, i);
    case 3:
      return f(std::integral_constant<int, 3>{}, i);
    case 2:
      return f(std::integral_constant<int, 2>{}, i);
    case 1:
      return f(std::integral_constant<int, 1>{}, i);
    default:
      return;
  }
}

// This thread's scratch buffer `which`, 64-byte aligned, at least `floats` long (grown once,
// reused by every later item and call).
float* scratch(int which, int64_t floats) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& buffer = buffers[which];
  if (static_cast<int64_t>(buffer.size()) < floats + 16)
    buffer.resize(static_cast<size_t>(floats + 16));
  auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<float*>((address + 63) & ~uintptr_t(63));
}

// Transposes 16 rows of 16 floats in registers: out[c] lane r = rows[r] lane c. Four rounds of
// shuffles (64 in all): pairs of rows interleaved, then pairs of pairs, then 128-bit lanes twice.
void transpose_16x16(const __m512 (&rows)[16], __m512 (&out)[16]) {
  __m512 a[16], b[16], c[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_ps(rows[i], rows[i + 1]);
    a[i + 1] = _mm512_unpackhi_ps(rows[i], rows[i + 1]);
  }
  // b[4i + k], 128-bit lane L: column 4L + k of rows 4i .. 4i + 3.
  for (int i = 0; i < 16; i += 4) {
    const __m512d a0 = _mm512_castps_pd(a[i]), a1 = _mm512_castps_pd(a[i + 1]);
    const __m512d a2 = _mm512_castps_pd(a[i + 2]), a3 = _mm512_castps_pd(a[i + 3]);
    b[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    b[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    b[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    b[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  // c[8h + k]: columns k, 8 + k (0x88) or 4 + k, 12 + k (0xdd) of rows 8h .. 8h + 7.
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k) {
      c[8 * h + k] = _mm512_shuffle_f32x4(b[8 * h + k], b[8 * h + 4 + k], 0x88);
      c[8 * h + 4 + k] = _mm512_shuffle_f32x4(b[8 * h + k], b[8 * h + 4 + k], 0xdd);
    }
  for (int k = 0; k < 4; ++k) {
    out[k] = _mm512_shuffle_f32x4(c[k], c[8 + k], 0x88);
    out[8 + k] = _mm512_shuffle_f32x4(c[k], c[8 + k], 0xdd);
    out[4 + k] = _mm512_shuffle_f32x4(c[4 + k], c[12 + k], 0x88);
    out[12 + k] = _mm512_shuffle_f32x4(c[4 + k], c[12 + k], 0xdd);
  }
}

// t[c·16 + j] = x[j, c] for the keys j < m, 0 in the lanes beyond: x's columns as registers,
// transposed 16 columns at a time (gathers measured 3x slower: 36% of the forward).
void key_columns(Mat<const float> x, int64_t m, int64_t cols, float* t) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 lanes = first_lanes(cols - c0);
    __m512 rows[16], columns[16];
    for (int64_t j = 0; j < 16; ++j)
      rows[j] = j < m ? _mm512_maskz_loadu_ps(lanes, x.data + j * x.ld + c0) : _mm512_setzero_ps();
    transpose_16x16(rows, columns);
    const int64_t count = std::min<int64_t>(16, cols - c0);
    for (int64_t c = 0; c < count; ++c) _mm512_store_ps(t + (c0 + c) * 16, columns[c]);
  }
}

// acc[r] = Σ_c a[r, c] · t[c·16 ..] for R rows of a (row stride lda): each row against every key.
template <int R>
void rows_against_keys(const float* a, int64_t lda, const float* t, int64_t cols,
                       __m512 (&acc)[kGroup]) {
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols; ++c) {
    const __m512 column = _mm512_load_ps(t + c * 16);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + c]), column, acc[r]);
  }
}

// y[r, :cols] = Σ_{j < m} w[r·16 + j] · x[j, :cols] for R rows: P v, dS k (w: rows of 16 weights).
template <int R>
void weighted_key_rows(const float* w, int64_t m, Mat<const float> x, int64_t cols, float* y,
                       int64_t ldy) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 lanes = first_lanes(cols - c0);
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < m; ++j) {
      const __m512 xj = _mm512_maskz_loadu_ps(lanes, x.data + j * x.ld + c0);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(w[r * 16 + j]), xj, acc[r]);
    }
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy + c0, lanes, acc[r]);
  }
}

// y[j, :cols] = Σ_{i < n} w[i·16 + j] · x[i, :cols] for the R keys j0 ≤ j < j0 + R: Pᵀ dout, dSᵀ q.
template <int R>
void weighted_query_rows(const float* w, int64_t j0, int64_t n, Mat<const float> x, int64_t cols,
                         float* y, int64_t ldy) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 lanes = first_lanes(cols - c0);
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; ++i) {
      const __m512 xi = _mm512_maskz_loadu_ps(lanes, x.data + i * x.ld + c0);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(w[i * 16 + j0 + r]), xi, acc[r]);
    }
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (j0 + r) * ldy + c0, lanes, acc[r]);
  }
}

// scale · s, rounded to float32 here. A plain multiply may be fused by the compiler into the
// subtraction that follows (GCC contracts intrinsics under its default -ffp-contract=fast), and
// the unrounded product minus the log-sum-exp of the rounded ones is then off by up to half an
// ulp of the scores: at scores of 4e11 (a diverging run) that is exp(16384) = inf.
__m512 scaled(__m512 s, __m512 scale) {
  return _mm512_mul_round_ps(s, scale, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// The keys query i may see (lanes j < m its mask allows).
__mmask16 allowed_keys(const MaskRows<float>& mask, int64_t i, int64_t m) {
  return allowed_lanes(mask.row_of(i), 0, m);
}

// p = softmax of the scores s over the lanes `allowed`, 0 elsewhere; returns the log-sum-exp.
// As avx512::softmax_row: a masked row with no allowed key is all 0 with log-sum-exp -inf.
inline float softmax_lanes(__m512 s, __mmask16 allowed, bool masked, float* p) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  const float top = _mm512_mask_reduce_max_ps(allowed, s);
  if (masked && top == kNone) {
    _mm512_store_ps(p, _mm512_setzero_ps());
    return kNone;
  }
  const __m512 e =
      _mm512_maskz_mov_ps(allowed, avx512::exp_of(_mm512_sub_ps(s, _mm512_set1_ps(top))));
  const float total = _mm512_reduce_add_ps(e);
  _mm512_store_ps(p, _mm512_mul_ps(e, _mm512_set1_ps(1.0f / total)));
  return top + std::log(total);
}

// Σ_c a[c] · b[c] over cols floats.
float row_dot(const float* a, const float* b, int64_t cols) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols; c += 16) {
    const __mmask16 lanes = first_lanes(cols - c);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, a + c), _mm512_maskz_loadu_ps(lanes, b + c),
                          acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace

void short_keys_forward(int64_t n, int64_t m, int64_t d, int64_t e, float scale, Mat<const float> q,
                        Mat<const float> k, Mat<const float> v, const MaskRows<float>& mask,
                        Mat<float> out, float* lse) {
  float* kt = scratch(0, d * 16);
  key_columns(k, m, d, kt);
  const __m512 scale_v = _mm512_set1_ps(scale);
  in_groups(n, [&](auto size, int64_t i0) {
    constexpr int R = decltype(size)::value;
    __m512 s[kGroup];
    rows_against_keys<R>(q.data + i0 * q.ld, q.ld, kt, d, s);
    alignas(64) float p[R * 16];
    for (int r = 0; r < R; ++r)
      lse[i0 + r] = softmax_lanes(scaled(s[r], scale_v), allowed_keys(mask, i0 + r, m),
                                  mask.data != nullptr, p + r * 16);
    weighted_key_rows<R>(p, m, v, e, out.data + i0 * out.ld, out.ld);
  });
}

void short_keys_backward(int64_t n, int64_t m, int64_t d, int64_t e, float scale,
                         Mat<const float> q, Mat<const float> k, Mat<const float> v,
                         const MaskRows<float>& mask, Mat<const float> out, const float* lse,
                         Mat<const float> dout, Mat<float> dq, Mat<float> dk, Mat<float> dv) {
  float* kt = scratch(0, d * 16);
  float* vt = scratch(1, e * 16);
  float* p = scratch(2, n * 16);   // P, a row of 16 per query
  float* ds = scratch(3, n * 16);  // scale · dS, likewise
  key_columns(k, m, d, kt);
  key_columns(v, m, e, vt);
  const __m512 scale_v = _mm512_set1_ps(scale);
  // Per group of queries: P again, dP = dout vᵀ, dS = P ∘ (dP − rowsum(dout ∘ out)), dq = dS k.
  in_groups(n, [&](auto size, int64_t i0) {
    constexpr int R = decltype(size)::value;
    __m512 s[kGroup], dp[kGroup];
    rows_against_keys<R>(q.data + i0 * q.ld, q.ld, kt, d, s);
    rows_against_keys<R>(dout.data + i0 * dout.ld, dout.ld, vt, e, dp);
    for (int r = 0; r < R; ++r) {
      const int64_t i = i0 + r;
      if (lse[i] == -std::numeric_limits<float>::infinity()) {  // no key: no gradient
        _mm512_store_ps(p + i * 16, _mm512_setzero_ps());
        _mm512_store_ps(ds + i * 16, _mm512_setzero_ps());
        continue;
      }
      const __m512 pr = _mm512_maskz_mov_ps(
          allowed_keys(mask, i, m),
          avx512::exp_of(_mm512_sub_ps(scaled(s[r], scale_v), _mm512_set1_ps(lse[i]))));
      const float dot = row_dot(dout.data + i * dout.ld, out.data + i * out.ld, e);
      _mm512_store_ps(p + i * 16, pr);
      _mm512_store_ps(
          ds + i * 16,
          _mm512_mul_ps(_mm512_mul_ps(pr, _mm512_sub_ps(dp[r], _mm512_set1_ps(dot))), scale_v));
    }
    weighted_key_rows<R>(ds + i0 * 16, m, k, d, dq.data + i0 * dq.ld, dq.ld);
  });
  // Per group of keys, over every query: dv = Pᵀ dout, dk = dSᵀ q.
  in_groups(m, [&](auto size, int64_t j0) {
    constexpr int R = decltype(size)::value;
    weighted_query_rows<R>(p, j0, n, dout, e, dv.data, dv.ld);
    weighted_query_rows<R>(ds, j0, n, q, d, dk.data, dk.ld);
  });
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace mixlab::cpu
