// One vector register of float32 lanes, under the names the register kernels use (the product
// tiles of register_tile.h, the attention cores of attention_short_keys.cpp, register_sums.h):
// AVX-512's 16 lanes (Lanes512) or AVX2's 8 (Lanes256), so that each kernel is written once and
// compiled for the widest registers the build has. `Lanes` is that one; MIXLAB_HAS_LANES says
// there is one (AVX2 with FMA at least): a kernel written for AVX-512 alone would fall back to
// OpenBLAS or to scalar-ish loops on the many machines with AVX2 only (AMD's Zen 3, say).
//
// Each also says what its register file holds: the tile of C a product kernel keeps in
// accumulators (kTileRows × kTileVectors registers, with the panel's registers and a broadcast
// beside them: 24 + 4 + 1 of AVX-512's 32, 12 + 2 + 1 of AVX2's 16).
#pragma once
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define MIXLAB_HAS_LANES 1
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#if defined(__AVX512F__)
#include "backends/cpu/simd/avx512_math.h"
#endif

namespace mixlab::cpu {

#if defined(__AVX512F__)
// GCC 12 warns that intrinsics' internal _mm512_undefined_ps() "may be used uninitialized"
// (_mm512_max_ps, the reductions; GCC bug 105593, fixed in GCC 13) wherever a kernel inlines
// these members; nothing reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
struct Lanes512 {
  using V = __m512;
  using Mask = __mmask16;  // which lanes a load or store touches
  static constexpr int kWidth = 16;
  static constexpr int kTileRows = 6, kTileVectors = 4;

  static Mask first(int64_t n) { return avx512::first_lanes(std::max<int64_t>(n, 0)); }
  static Mask all() { return 0xffff; }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_load_ps(p); }  // p on 64 bytes
  static void store(float* p, V v) { _mm512_store_ps(p, v); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  // A store that bypasses the caches (p on 64 bytes): weakly ordered, so a writer ends its
  // streaming with fence() before another thread may read.
  static void stream(float* p, V v) { _mm512_stream_ps(p, v); }
  static void fence() { _mm_sfence(); }
  // Masked: the lanes outside `m` read as 0 and are left unwritten (no fault past an array).
  static V load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // a · b rounded to float32 here, never fused by the compiler into a later add (GCC contracts
  // intrinsics under its default -ffp-contract=fast).
  static V mul_rounded(V a, V b) {
    return _mm512_mul_round_ps(a, b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static float sum(V v) { return _mm512_reduce_add_ps(v); }
  // The larger of a and b per lane; b where either is NaN (vmaxps), so a running maximum kept in b
  // skips NaN in a.
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float max_of(V v) { return _mm512_reduce_max_ps(v); }
  // v where marks (a row of 0/1 marks) is nonzero, `otherwise` elsewhere.
  static V keep_marked(V marks, V v, V otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(marks, zero(), _CMP_NEQ_UQ), otherwise, v);
  }
  // v in the lanes of m, `otherwise` in the others.
  static V select(Mask m, V v, V otherwise) { return _mm512_mask_blend_ps(m, otherwise, v); }
  // The lanes of `within` whose mark (a row of 0/1 marks, read in those lanes only) is nonzero.
  static Mask marked(const float* marks, Mask within) {
    return _mm512_mask_cmp_ps_mask(within, load(marks, within), zero(), _CMP_NEQ_UQ);
  }

  // out[c] lane r = rows[r] lane c. Four rounds of shuffles (64 in all): pairs of rows
  // interleaved, then pairs of pairs, then 128-bit lanes twice.
  static void transpose(const V (&rows)[16], V (&out)[16]) {
    V a[16], b[16], c[16];
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
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
using Lanes = Lanes512;

#else
struct Lanes256 {
  using V = __m256;
  // AVX2 masks are vectors (vmaskmovps); `whole` lets a full register take a plain load or
  // store, which vmaskmovps is several times slower than (its store especially, on AMD).
  struct Mask {
    __m256i bits;
    bool whole;
  };
  static constexpr int kWidth = 8;
  static constexpr int kTileRows = 6, kTileVectors = 2;

  static Mask first(int64_t n) {
    const int lanes = static_cast<int>(std::clamp<int64_t>(n, 0, 8));
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return {_mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), index), lanes == 8};
  }
  static Mask all() { return first(8); }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_load_ps(p); }  // p on 32 bytes
  static void store(float* p, V v) { _mm256_store_ps(p, v); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  // A store that bypasses the caches (p on 32 bytes): weakly ordered, so a writer ends its
  // streaming with fence() before another thread may read.
  static void stream(float* p, V v) { _mm256_stream_ps(p, v); }
  static void fence() { _mm_sfence(); }
  static V load(const float* p, Mask m) {
    return m.whole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m.bits);
  }
  static void store(float* p, Mask m, V v) {
    if (m.whole)
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, m.bits, v);
  }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // The empty asm hides the product from the optimiser, which can then not fuse it into an add.
  static V mul_rounded(V a, V b) {
    V product = _mm256_mul_ps(a, b);
    __asm__("" : "+x"(product));
    return product;
  }
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // The larger of a and b per lane; b where either is NaN (vmaxps), so a running maximum kept in b
  // skips NaN in a.
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static float max_of(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  // v where marks (a row of 0/1 marks) is nonzero, `otherwise` elsewhere.
  static V keep_marked(V marks, V v, V otherwise) {
    return _mm256_blendv_ps(otherwise, v, _mm256_cmp_ps(marks, zero(), _CMP_NEQ_UQ));
  }
  // v in the lanes of m, `otherwise` in the others.
  static V select(Mask m, V v, V otherwise) {
    return _mm256_blendv_ps(otherwise, v, _mm256_castsi256_ps(m.bits));
  }
  // The lanes of `within` whose mark (a row of 0/1 marks, read in those lanes only) is nonzero.
  static Mask marked(const float* marks, Mask within) {
    const __m256 nonzero = _mm256_cmp_ps(load(marks, within), zero(), _CMP_NEQ_UQ);
    return {_mm256_and_si256(within.bits, _mm256_castps_si256(nonzero)), false};
  }

  // out[c] lane r = rows[r] lane c: pairs of rows interleaved, then pairs of pairs (columns c
  // and c + 4 of 4 rows), then the 128-bit halves of rows 0-3 and 4-7 joined.
  static void transpose(const V (&rows)[8], V (&out)[8]) {
    V a[8], b[8];
    for (int i = 0; i < 8; i += 2) {
      a[i] = _mm256_unpacklo_ps(rows[i], rows[i + 1]);
      a[i + 1] = _mm256_unpackhi_ps(rows[i], rows[i + 1]);
    }
    // b[4h + k]: column k (low half) and k + 4 (high half) of rows 4h .. 4h + 3.
    for (int h = 0; h < 8; h += 4) {
      b[h] = _mm256_shuffle_ps(a[h], a[h + 2], 0x44);
      b[h + 1] = _mm256_shuffle_ps(a[h], a[h + 2], 0xee);
      b[h + 2] = _mm256_shuffle_ps(a[h + 1], a[h + 3], 0x44);
      b[h + 3] = _mm256_shuffle_ps(a[h + 1], a[h + 3], 0xee);
    }
    for (int k = 0; k < 4; ++k) {
      out[k] = _mm256_permute2f128_ps(b[k], b[4 + k], 0x20);
      out[4 + k] = _mm256_permute2f128_ps(b[k], b[4 + k], 0x31);
    }
  }
};
#if !defined(MIXLAB_EMULATE_LANES16)
using Lanes = Lanes256;
#endif
#endif
}  // namespace mixlab::cpu

#if defined(MIXLAB_EMULATE_LANES16) && !defined(__AVX512F__)
// A test build's 16 lanes on AVX2 (lanes16_emulated.h): the AVX-512 forms of every register
// kernel, run on a machine without AVX-512.
#include "backends/cpu/simd/lanes16_emulated.h"
namespace mixlab::cpu {
using Lanes = Lanes16;
}  // namespace mixlab::cpu
#endif

namespace mixlab::cpu {

// (GCC 12 takes the 512-bit shuffles' undefined first operands, inlined here, for uninitialised
// values, as in register_tile.h: a false -Wuninitialized.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// One block of a transpose through registers: dst[c·ld_dst + r] = src[r·ld_src + c] for
// r < rows and c < cols (each at most Lanes::kWidth; rows may be 0). Source rows past `rows`
// read as zeros; each destination row is written in the lanes of `store` (all of them, to keep
// those zeros, for a packed buffer; the first `rows`, for a matrix that ends there).
inline void transpose_block(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                            float* dst, int64_t ld_dst, Lanes::Mask store) {
  using L = Lanes;
  const L::Mask lanes = L::first(cols);
  L::V in[L::kWidth], out[L::kWidth];
  for (int64_t r = 0; r < L::kWidth; ++r)
    in[r] = r < rows ? L::load(src + r * ld_src, lanes) : L::zero();
  L::transpose(in, out);
  for (int64_t c = 0; c < cols; ++c) L::store(dst + c * ld_dst, store, out[c]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace mixlab::cpu
#endif
