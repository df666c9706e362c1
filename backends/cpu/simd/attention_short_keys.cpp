// The attention core for items of at most 64 keys, in vector registers (attention_short_keys.h;
// simd_lanes.h: AVX-512's 16 lanes or AVX2's 8, one code for both).
//
// Why: per-head products are small: the translator's [12, 32] x [32, 12] is 4,608 multiply-adds,
// 288 register FMAs, and OpenBLAS's small-matrix path took about 400 ns for it (the backward
// makes five per item); at the classifier's 49 tokens a forward call ran at 39 GFLOP/s, products,
// softmax rows and calls together. Here a row of scores is KV registers of kWidth lanes (at most
// 64 keys): lane j of register kv holds key kWidth·kv + j. Keys' columns are transposed once per
// item (kᵀ and vᵀ as [cols, W], W = kWidth·KV, zero beyond the m keys), so
//   - rows of scores (q kᵀ, or dout vᵀ in the backward) are cols broadcast-FMAs into KV
//     registers each, for several rows at once (kScoreRows; with AVX2, 6 rows against 2
//     registers of keys at a time: 12 independent chains);
//   - each row, scaled and stored in L1, takes the tiles' softmax operations in their order
//     (softmax_rows: vector_math's softmax_row, the group's rows interleaved), so both paths
//     give a row the same probabilities and log-sum-exp;
//   - an item of at least 32 rows first copies the rows it reads more than once out of their
//     [B, N, ·] tensors into L1 (packed_rows);
//   - weighted sums of key rows (P v, dS k) and of query rows (Pᵀ dout, dSᵀ q) broadcast one
//     weight at a time against registers of features, a block of output rows at once.
// The synthesizers' core (logits given) takes the same pieces: each row of logits is stored in
// L1 as the scaled scores are, dP = dout vᵀ is rows against the values' columns, and dlogits is
// written from the registers.
// Every sum runs in a fixed order whatever the thread count (one item on one thread).
#include "backends/cpu/simd/attention_short_keys.h"

#include "backends/cpu/simd/simd_lanes.h"

#if defined(MIXLAB_HAS_LANES)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/simd/register_sums.h"
#include "backends/cpu/simd/register_tile.h"
#include "backends/kernel_products.h"
#else
#include <string>

#include "core/error.h"
#endif

namespace mixlab::cpu {

bool short_keys_fit(int64_t m, int64_t d, int64_t e, const MaskRows<float>& mask) {
#if defined(MIXLAB_HAS_LANES)
  return m >= 1 && m <= kMaxKeys && d >= 1 && e >= 1 && (!mask.data || mask.col == 1);
#else
  (void)m, (void)d, (void)e, (void)mask;
  return false;
#endif
}

#if defined(MIXLAB_HAS_LANES)
// GCC 12 warns that the reductions' internal _mm256_undefined_pd() is used uninitialized (GCC
// bug 105593, fixed in GCC 13), as in avx512_math.h; nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

using L = Lanes;
using V = L::V;
constexpr int kLanes = L::kWidth;

// This thread's scratch buffer `which`, on a cache line, at least `floats` long (grown once,
// reused by every later item and call).
float* scratch(int which, int64_t floats) {
  thread_local std::vector<float> buffers[8];
  return aligned_scratch(buffers[which], floats);
}

// x's rows [0, rows) copied into this thread's scratch buffer `which`, one after another (cols
// floats apart), when there are at least kPackRows of them; fewer are left where they are.
// An item's rows lie in a [B, N, ·] tensor (the classifier's q, k and v: a head's 128 bytes of
// every 1,536-byte row of the stacked projection), and the weighted sums read each of them once
// per group of output rows (9 times at 49 tokens). Packing saves 6-10% of the classifier's core
// (AVX2, the core alone, 512 items a call); the translator's items of about 12 rows, read
// twice, are slower packed, so they stay in place.
constexpr int64_t kPackRows = 32;

// dst's rows [0, rows) = src's, cols floats each; with `stream`, whole registers streamed past the
// caches (cols a multiple of kLanes, dst's rows on a register's alignment: the caller checks).
void copy_rows(Mat<const float> src, Mat<float> dst, int64_t rows, int64_t cols, bool stream) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = src.data + r * src.ld;
    float* to = dst.data + r * dst.ld;
    int64_t c = 0;
    if (stream)
      for (; c < cols; c += kLanes) L::stream(to + c, L::loadu(from + c));
    for (; c + kLanes <= cols; c += kLanes) L::storeu(to + c, L::loadu(from + c));
    if (c < cols) L::store(to + c, L::first(cols - c), L::load(from + c, L::first(cols - c)));
  }
}

Mat<const float> packed_rows(Mat<const float> x, int64_t rows, int64_t cols, int which) {
  if (rows < kPackRows || x.ld == cols) return x;
  const Mat<float> packed{scratch(which, rows * cols), cols};
  copy_rows(x, packed, rows, cols, false);
  return {packed.data, cols};
}

// A long item's output rows (at least kPackRows: out, or dq, dk and dv) are formed in this
// thread's scratch buffer 7 and then streamed to their [B, N, ·] tensor past the caches
// (written_rows). Formed in place, each group of rows stored into lines not yet in any cache
// (a head's 128 bytes of rows 1,536 bytes apart), which took the L1 the item's operands were
// using and made the store buffer wait on reads of lines about to be overwritten. Asking for
// those lines ahead (prefetchw) did not help. Staged and streamed, the attention classifier's
// `attention` kernel takes 9% and `attention_backward` 15% less time (AVX2, 49 tokens, one
// thread, MIXLAB_DEBUG=1's table), the products that read the rows afterwards unchanged. A short
// item's rows are formed in place.
Mat<float> staged_rows(Mat<float> dst, int64_t rows, int64_t cols) {
  if (rows < kPackRows || dst.ld == cols) return dst;
  return {scratch(7, rows * cols), cols};
}

// The staged rows copied to dst (nothing when they were formed there): streaming stores where
// dst's rows are whole registers on their alignment, then a fence, so that the thread that
// joins this one's work reads them; plain stores otherwise.
void written_rows(Mat<float> staged, Mat<float> dst, int64_t rows, int64_t cols) {
  if (staged.data == dst.data) return;
  const bool stream = reinterpret_cast<uintptr_t>(dst.data) % (sizeof(float) * kLanes) == 0 &&
                      dst.ld % kLanes == 0 && cols % kLanes == 0;
  copy_rows({staged.data, staged.ld}, dst, rows, cols, stream);
  if (stream) L::fence();
}

// y's rows (`rows` of them) = weighted_sum_rows' weighted sums, a long item's staged.
void weighted_sum_into(const float* w, int64_t w_row, int64_t w_step, int64_t count,
                       Mat<const float> x, int64_t cols, Mat<float> y, int64_t rows) {
  const Mat<float> staged = staged_rows(y, rows, cols);
  weighted_sum_rows(w, w_row, w_step, count, x, cols, staged.data, staged.ld, rows);
  written_rows(staged, y, rows, cols);
}

// t[c·W + j] = x[j, c] for the keys j < m, 0 in the lanes beyond (W = kLanes·KV floats a row):
// x's columns as KV registers each, transposed kLanes keys by kLanes columns at a time (gathers
// ran no faster, and would need 32-bit offsets).
template <int KV>
void key_columns(Mat<const float> x, int64_t m, int64_t cols, float* t) {
  constexpr int64_t W = kLanes * KV;
  for (int64_t j0 = 0; j0 < W; j0 += kLanes)
    for (int64_t c0 = 0; c0 < cols; c0 += kLanes)
      transpose_block(x.data + j0 * x.ld + c0, x.ld, std::clamp<int64_t>(m - j0, 0, kLanes),
                      std::min<int64_t>(kLanes, cols - c0), t + c0 * W + j0, W, L::all());
}

// Registers of keys formed together: AVX-512 takes a whole row (up to 4 registers, the rows'
// accumulators within its 32 registers); AVX2 (16 registers) takes a row of up to 64 keys in
// blocks of 2 registers, so that 6 rows (12 accumulators) are formed at once. With the whole
// row of 7 registers (49 keys) only one row fit, and its 7 chains waited on the FMAs' latency
// and on one broadcast of the query per 7 FMAs.
template <int KV>
constexpr int kKeyBlock = kLanes == 16 ? KV : std::min(KV, 2);

// sum[r][b] = Σ_c a[r, c] · t[c·W + kLanes·(kv0 + b) ..] for R rows of a (row stride lda) and
// the B registers of keys from kv0, into acc[r][kv0 + b] (R·B independent chains).
template <int R, int B, int KV>
void rows_against_key_block(const float* a, int64_t lda, const float* t, int64_t cols, int kv0,
                            V (&acc)[R][KV]) {
  constexpr int64_t W = kLanes * KV;
  // Local accumulators: updated through `acc`, they were stored back on every step of c (the
  // compiler cannot rule out that `a` reads them), 2x slower at 49 keys.
  V sum[R][B];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) sum[r][b] = L::zero();
  for (int64_t c = 0; c < cols; ++c) {
    V column[B];
    for (int b = 0; b < B; ++b) column[b] = L::load(t + c * W + kLanes * (kv0 + b));
    for (int r = 0; r < R; ++r) {
      const V a_rc = L::set1(a[r * lda + c]);
      for (int b = 0; b < B; ++b) sum[r][b] = L::fmadd(a_rc, column[b], sum[r][b]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) acc[r][kv0 + b] = sum[r][b];
}

// acc[r][kv] = Σ_c a[r, c] · t[c·W + kLanes·kv ..] for R rows of a (row stride lda): each row
// against every key, kKeyBlock<KV> registers of keys at a time. Each score sums over c in order,
// whatever the blocks.
template <int R, int KV>
void rows_against_keys(const float* a, int64_t lda, const float* t, int64_t cols, V (&acc)[R][KV]) {
  kernel_products::ProductSpan product;  // MIXLAB_DEBUG's table of fused kernels
  constexpr int B = kKeyBlock<KV>;
  int kv0 = 0;
  for (; kv0 + B <= KV; kv0 += B) rows_against_key_block<R, B, KV>(a, lda, t, cols, kv0, acc);
  if constexpr (KV % B != 0) rows_against_key_block<R, KV % B, KV>(a, lda, t, cols, kv0, acc);
}

// Stores the R rows of scaled scores s (all W lanes; those past the m keys hold 0) as rows of p.
// scale · s is rounded to float32 here (L::mul_rounded). A plain multiply may be fused by the
// compiler into the subtraction that follows (GCC contracts intrinsics under its default
// -ffp-contract=fast), and the unrounded product minus the log-sum-exp of the rounded ones is
// then off by up to half an ulp of the scores: at scores of 4e11 (a diverging run) that is
// exp(16384) = inf.
template <int R, int KV>
void store_scaled(const V (&s)[R][KV], V scale, float* p) {
  for (int r = 0; r < R; ++r)
    for (int kv = 0; kv < KV; ++kv)
      L::store(p + r * kLanes * KV + kLanes * kv, L::mul_rounded(s[r][kv], scale));
}

// Σ_c a[c] · b[c] over cols floats.
float row_dot(const float* a, const float* b, int64_t cols) {
  V acc = L::zero();
  for (int64_t c = 0; c < cols; c += kLanes) {
    const L::Mask lanes = L::first(cols - c);
    acc = L::fmadd(L::load(a + c, lanes), L::load(b + c, lanes), acc);
  }
  return L::sum(acc);
}

// dS for R rows of queries from i0, KV registers each: P ∘ (dP − rowsum(dout ∘ out)) · scale,
// P's rows in p (W = kLanes·KV floats apart), dP in acc; stored to dst's rows (row stride ld),
// the lanes of the m keys only.
// unscaled (where not null: the bias's gradient) gets P ∘ (dP − rowsum(dout ∘ out)) itself.
template <int R, int KV>
void store_softmax_grad(const V (&acc)[R][KV], const float* p, Mat<const float> dout,
                        Mat<const float> out, int64_t i0, int64_t m, int64_t e, V scale, float* dst,
                        int64_t ld, Mat<float> unscaled = {nullptr, 0}) {
  constexpr int64_t W = kLanes * KV;
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r;
    const V dot = L::set1(row_dot(dout.data + i * dout.ld, out.data + i * out.ld, e));
    for (int kv = 0; kv < KV; ++kv) {
      const V pr = L::load(p + i * W + kLanes * kv);
      const L::Mask keys = L::first(m - kLanes * kv);
      const V ds = L::mul(pr, L::sub(acc[r][kv], dot));
      L::store(dst + i * ld + kLanes * kv, keys, L::mul(ds, scale));
      if (unscaled.data) L::store(unscaled.data + i * unscaled.ld + kLanes * kv, keys, ds);
    }
  }
}

// Adds the bias's rows i0..i0+R (m keys; data null: nothing) to P's rows of scaled scores.
template <int R, int KV>
void add_bias_rows(Mat<const float> bias, int64_t i0, int64_t m, float* p) {
  if (!bias.data) return;
  constexpr int64_t W = kLanes * KV;
  for (int r = 0; r < R; ++r) {
    const float* row = bias.data + (i0 + r) * bias.ld;
    for (int kv = 0; kv < KV; ++kv) {
      float* lanes = p + (i0 + r) * W + kLanes * kv;
      L::store(lanes,
               L::add(L::load(lanes), L::load(row + kLanes * kv, L::first(m - kLanes * kv))));
    }
  }
}

// The softmax of R rows of scaled scores in p from row i0 (W = kLanes·KV floats apart) over the
// keys each row may see (the m keys, less those its mask row, if any, marks 0); those it may not
// get 0, as do the lanes past m. Each row's log-sum-exp to lse[i]: -inf, with a row of zeros,
// where no key is allowed. Per row these are vector_math::softmax_row's operations in its order
// (the same bits as the tiles' rows); the group's rows are interleaved, step by step, so that
// their exponentials and reductions are in flight together: one row at a time, each row's
// maximum, sum and logarithm waited on the one before (AVX2, the classifier's 49 keys: the
// softmax was a fifth of the core's time).
template <int R, int KV>
void softmax_rows(float* p, int64_t i0, int64_t m, const MaskRows<float>& mask, float* lse) {
  constexpr int64_t W = kLanes * KV;
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  const V none = L::set1(kNone);
  L::Mask allowed[R][KV];
  for (int r = 0; r < R; ++r)
    for (int kv = 0; kv < KV; ++kv) {
      allowed[r][kv] = L::first(m - kLanes * kv);
      if (mask.data) allowed[r][kv] = L::marked(mask.row_of(i0 + r) + kLanes * kv, allowed[r][kv]);
    }
  float top[R];
  for (int r = 0; r < R; ++r) {
    const float* row = p + (i0 + r) * W;
    V hi = none;
    for (int kv = 0; kv < KV; ++kv)
      hi = L::max(L::select(allowed[r][kv], L::load(row + kLanes * kv), none), hi);
    top[r] = L::max_of(hi);
  }
  V total[R];
  for (int r = 0; r < R; ++r) {
    float* row = p + (i0 + r) * W;
    const V top_v = L::set1(top[r]);
    total[r] = L::zero();
    for (int kv = 0; kv < KV; ++kv) {
      const V e = vector_math::exp_of(L::sub(L::load(row + kLanes * kv), top_v));
      const V kept = L::select(allowed[r][kv], e, L::zero());
      L::store(row + kLanes * kv, kept);
      total[r] = L::add(total[r], kept);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* row = p + (i0 + r) * W;
    if (mask.data && top[r] == kNone) {  // no key allowed: a row of zeros (already: every lane 0)
      lse[i0 + r] = kNone;
      continue;
    }
    const float sum = L::sum(total[r]);
    const V inv = L::set1(1.0f / sum);
    for (int kv = 0; kv < KV; ++kv)
      L::store(row + kLanes * kv, L::mul(L::load(row + kLanes * kv), inv));
    lse[i0 + r] = top[r] + std::log(sum);
  }
}

// R rows of P again from their scores in p (from row i0, W floats apart) and saved log-sum-exps:
// vector_math::exp_shifted_row's operations per row, the rows interleaved as in softmax_rows.
// Lanes of keys a row may not see (and past m) get 0.
template <int R, int KV>
void probabilities_again_rows(float* p, int64_t i0, int64_t m, const MaskRows<float>& mask,
                              const float* lse) {
  constexpr int64_t W = kLanes * KV;
  for (int r = 0; r < R; ++r) {
    float* row = p + (i0 + r) * W;
    const float shift = lse[i0 + r];
    const bool none = shift == -std::numeric_limits<float>::infinity();  // no key allowed
    const V shift_v = L::set1(shift);
    for (int kv = 0; kv < KV; ++kv) {
      L::Mask allowed = L::first(m - kLanes * kv);
      if (mask.data) allowed = L::marked(mask.row_of(i0 + r) + kLanes * kv, allowed);
      const V e = vector_math::exp_of(L::sub(L::load(row + kLanes * kv), shift_v));
      L::store(row + kLanes * kv, none ? L::zero() : L::select(allowed, e, L::zero()));
    }
  }
}

// Query rows whose scores are formed together. AVX-512: R·KV accumulators 8, 16, 21 and 28 for
// KV = 1 to 4, within the 32 registers with the key columns beside them (the row's element is
// broadcast from memory inside the FMA): at 49 keys, 7 rows a group (7 groups) formed the scores
// 1.2-1.3x faster than 4 (10 groups of 4 and 3 of 3), fewer column loads per FMA (Zen 4).
// AVX2 (16 registers, up to 8 of them a row of 64 keys): at most 12 accumulators,
// the columns read from L1 as operands.
template <int KV>
constexpr int kScoreRows = kLanes == 16 ? (KV <= 2 ? 8 : 7) : (KV == 1 ? 8 : 6);

template <int KV>
void forward(int64_t n, int64_t m, int64_t d, int64_t e, float scale, Mat<const float> q,
             Mat<const float> k, Mat<const float> v, const MaskRows<float>& mask,
             Mat<const float> bias, Mat<float> out, float* lse) {
  constexpr int64_t W = kLanes * KV;
  float* kt = scratch(0, d * W);
  float* p = scratch(2, n * W);  // P, a row of W per query
  key_columns<KV>(k, m, d, kt);
  q = packed_rows(q, n, d, 4);
  v = packed_rows(v, m, e, 5);
  const V scale_v = L::set1(scale);
  // Per group of queries: the scores, then each row's softmax as the tiles take it.
  in_groups<kScoreRows<KV>>(n, [&](auto size, int64_t i0) {
    constexpr int R = decltype(size)::value;
    V s[R][KV];
    rows_against_keys<R, KV>(q.data + i0 * q.ld, q.ld, kt, d, s);
    store_scaled<R, KV>(s, scale_v, p + i0 * W);
    add_bias_rows<R, KV>(bias, i0, m, p);
    softmax_rows<R, KV>(p, i0, m, mask, lse);
  });
  weighted_sum_into(p, W, 1, m, v, e, out, n);  // P v
}

template <int KV>
void backward(int64_t n, int64_t m, int64_t d, int64_t e, float scale, Mat<const float> q,
              Mat<const float> k, Mat<const float> v, const MaskRows<float>& mask,
              Mat<const float> bias, Mat<const float> out, const float* lse, Mat<const float> dout,
              Mat<float> dq, Mat<float> dk, Mat<float> dv, Mat<float> dbias) {
  constexpr int64_t W = kLanes * KV;
  float* kt = scratch(0, d * W);
  float* vt = scratch(1, e * W);
  float* p = scratch(2, n * W);   // P, a row of W per query
  float* ds = scratch(3, n * W);  // scale · dS, likewise
  key_columns<KV>(k, m, d, kt);
  key_columns<KV>(v, m, e, vt);
  q = packed_rows(q, n, d, 4);
  k = packed_rows(k, m, d, 5);
  dout = packed_rows(dout, n, e, 6);
  const V scale_v = L::set1(scale);
  // Per group of queries: P again, dP = dout vᵀ, dS = P ∘ (dP − rowsum(dout ∘ out)).
  in_groups<kScoreRows<KV>>(n, [&](auto size, int64_t i0) {
    constexpr int R = decltype(size)::value;
    V acc[R][KV];
    rows_against_keys<R, KV>(q.data + i0 * q.ld, q.ld, kt, d, acc);
    store_scaled<R, KV>(acc, scale_v, p + i0 * W);
    add_bias_rows<R, KV>(bias, i0, m, p);
    probabilities_again_rows<R, KV>(p, i0, m, mask, lse);
    rows_against_keys<R, KV>(dout.data + i0 * dout.ld, dout.ld, vt, e, acc);
    store_softmax_grad<R, KV>(acc, p, dout, out, i0, m, e, scale_v, ds, W, dbias);
  });
  // dq = dS k per group of queries; dv = Pᵀ dout and dk = dSᵀ q per group of keys.
  weighted_sum_into(ds, W, 1, m, k, d, dq, n);
  weighted_sum_into(p, 1, W, n, dout, e, dv, m);
  weighted_sum_into(ds, 1, W, n, q, d, dk, m);
}

// Row i of the logits into P's row (W lanes, 0 past the m keys): the synthesizers' scores.
template <int KV>
void logits_row(Mat<const float> logits, int64_t i, int64_t m, float* p_row) {
  for (int kv = 0; kv < KV; ++kv)
    L::store(p_row + kLanes * kv,
             L::load(logits.data + i * logits.ld + kLanes * kv, L::first(m - kLanes * kv)));
}

template <int KV>
void synthesized_forward(int64_t n, int64_t m, int64_t e, Mat<const float> logits,
                         Mat<const float> v, const MaskRows<float>& mask, Mat<float> out,
                         float* lse) {
  constexpr int64_t W = kLanes * KV;
  float* p = scratch(2, n * W);
  v = packed_rows(v, m, e, 5);
  in_groups<kScoreRows<KV>>(n, [&](auto size, int64_t i0) {
    constexpr int R = decltype(size)::value;
    for (int64_t i = i0; i < i0 + R; ++i) logits_row<KV>(logits, i, m, p + i * W);
    softmax_rows<R, KV>(p, i0, m, mask, lse);
  });
  weighted_sum_into(p, W, 1, m, v, e, out, n);  // P v
}

template <int KV>
void synthesized_backward(int64_t n, int64_t m, int64_t e, Mat<const float> logits,
                          Mat<const float> v, const MaskRows<float>& mask, Mat<const float> out,
                          const float* lse, Mat<const float> dout, Mat<float> dlogits,
                          Mat<float> dv) {
  constexpr int64_t W = kLanes * KV;
  float* vt = scratch(1, e * W);
  float* p = scratch(2, n * W);
  key_columns<KV>(v, m, e, vt);
  dout = packed_rows(dout, n, e, 6);
  // Per group of queries: P again, dP = dout vᵀ, dlogits = P ∘ (dP − rowsum(dout ∘ out)).
  in_groups<kScoreRows<KV>>(n, [&](auto size, int64_t i0) {
    constexpr int R = decltype(size)::value;
    for (int64_t i = i0; i < i0 + R; ++i) logits_row<KV>(logits, i, m, p + i * W);
    probabilities_again_rows<R, KV>(p, i0, m, mask, lse);
    V acc[R][KV];
    rows_against_keys<R, KV>(dout.data + i0 * dout.ld, dout.ld, vt, e, acc);
    store_softmax_grad<R, KV>(acc, p, dout, out, i0, m, e, L::set1(1.0f), dlogits.data,
                              dlogits.ld);  // (· 1: exact, the logits are not scaled)
  });
  weighted_sum_into(p, 1, W, n, dout, e, dv, m);  // dv = Pᵀ dout
}

// f(std::integral_constant<int, KV>{}) for the KV = ⌈m / kLanes⌉ registers a row of m keys
// takes.
template <typename F>
void with_key_registers(int64_t m, F&& f) {
  with_size<1, kMaxKeys / kLanes>((m + kLanes - 1) / kLanes, f);
}

}  // namespace

void short_keys_forward(int64_t n, int64_t m, int64_t d, int64_t e, float scale, Mat<const float> q,
                        Mat<const float> k, Mat<const float> v, const MaskRows<float>& mask,
                        Mat<const float> bias, Mat<float> out, float* lse) {
  with_key_registers(m, [&](auto kv) {
    forward<decltype(kv)::value>(n, m, d, e, scale, q, k, v, mask, bias, out, lse);
  });
}

void short_keys_backward(int64_t n, int64_t m, int64_t d, int64_t e, float scale,
                         Mat<const float> q, Mat<const float> k, Mat<const float> v,
                         const MaskRows<float>& mask, Mat<const float> bias, Mat<const float> out,
                         const float* lse, Mat<const float> dout, Mat<float> dq, Mat<float> dk,
                         Mat<float> dv, Mat<float> dbias) {
  with_key_registers(m, [&](auto kv) {
    backward<decltype(kv)::value>(n, m, d, e, scale, q, k, v, mask, bias, out, lse, dout, dq, dk,
                                  dv, dbias);
  });
}

void short_keys_synthesized_forward(int64_t n, int64_t m, int64_t e, Mat<const float> logits,
                                    Mat<const float> v, const MaskRows<float>& mask, Mat<float> out,
                                    float* lse) {
  with_key_registers(m, [&](auto kv) {
    synthesized_forward<decltype(kv)::value>(n, m, e, logits, v, mask, out, lse);
  });
}

void short_keys_synthesized_backward(int64_t n, int64_t m, int64_t e, Mat<const float> logits,
                                     Mat<const float> v, const MaskRows<float>& mask,
                                     Mat<const float> out, const float* lse, Mat<const float> dout,
                                     Mat<float> dlogits, Mat<float> dv) {
  with_key_registers(m, [&](auto kv) {
    synthesized_backward<decltype(kv)::value>(n, m, e, logits, v, mask, out, lse, dout, dlogits,
                                              dv);
  });
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
// Without AVX2 short_keys_fit says no and nothing calls these; they exist so that the callers,
// which choose at run time, link on every x86-64 (MIXLAB_NATIVE=OFF).
[[noreturn]] static void no_short_keys(const char* what) {
  throw Error(std::string(what) + ": the short-keys attention core needs an AVX2 or AVX-512 build");
}
void short_keys_forward(int64_t, int64_t, int64_t, int64_t, float, Mat<const float>,
                        Mat<const float>, Mat<const float>, const MaskRows<float>&,
                        Mat<const float>, Mat<float>, float*) {
  no_short_keys("short_keys_forward");
}
void short_keys_backward(int64_t, int64_t, int64_t, int64_t, float, Mat<const float>,
                         Mat<const float>, Mat<const float>, const MaskRows<float>&,
                         Mat<const float>, Mat<const float>, const float*, Mat<const float>,
                         Mat<float>, Mat<float>, Mat<float>, Mat<float>) {
  no_short_keys("short_keys_backward");
}
void short_keys_synthesized_forward(int64_t, int64_t, int64_t, Mat<const float>, Mat<const float>,
                                    const MaskRows<float>&, Mat<float>, float*) {
  no_short_keys("short_keys_synthesized_forward");
}
void short_keys_synthesized_backward(int64_t, int64_t, int64_t, Mat<const float>, Mat<const float>,
                                     const MaskRows<float>&, Mat<const float>, const float*,
                                     Mat<const float>, Mat<float>, Mat<float>) {
  no_short_keys("short_keys_synthesized_backward");
}
#endif

}  // namespace mixlab::cpu
