// A 16-lane register made of two AVX2 ones, under Lanes512's names and contracts: a stand-in for
// AVX-512 in test builds on machines without it (cmake -DMIXLAB_EMULATE_LANES16=ON; CI's
// sanitizer build uses it). The register kernels are written once for Lanes (simd_lanes.h), and
// their 16-lane forms differ from the 8-lane ones in more than width: tails and masks fall in
// other places, blocks of keys and rows have other sizes (attention_short_keys.cpp's kKeyBlock
// and kScoreRows, register_sums.h's kSumRows), a product tile holds 4 registers across, not 2.
// On an AVX2 machine those forms would never run, so a change made without AVX-512 hardware
// could break them unseen. Here they run, and under AddressSanitizer a read past an array's end is
// reported.
//
// Only what Lanes offers is emulated: code written for AVX-512 alone (`#if __AVX512F__`:
// avx512_math.h, long_gemm.cpp, float_rows.h's GLU and outer rows) is not compiled in such a build,
// and vector_math's rows stay AVX2's (vector_math.h). Speed means nothing here.
//
// The contracts AVX-512 enforces by faulting are checked too: load, store and stream need p on
// 64 bytes (vmovaps/vmovntps on a zmm register), so a pointer on 32 bytes only traps here
// instead of passing on AVX2 and faulting on an AVX-512 machine.
//
// Included by simd_lanes.h only, after Lanes256.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace mixlab::cpu {

struct Lanes16 {
  struct V {
    __m256 lo, hi;  // lanes 0-7 and 8-15
  };
  struct Mask {
    Lanes256::Mask lo, hi;
  };
  static constexpr int kWidth = 16;
  static constexpr int kTileRows = 6, kTileVectors = 4;  // as Lanes512

  static Mask first(int64_t n) { return {Lanes256::first(n), Lanes256::first(n - 8)}; }
  static Mask all() { return first(16); }
  static V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static V load(const float* p) {
    aligned(p);
    return loadu(p);
  }
  static void store(float* p, V v) {
    aligned(p);
    storeu(p, v);
  }
  static V loadu(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void storeu(float* p, V v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  static void stream(float* p, V v) {
    aligned(p);
    _mm256_stream_ps(p, v.lo);
    _mm256_stream_ps(p + 8, v.hi);
  }
  static void fence() { _mm_sfence(); }
  // Masked: the lanes outside `m` read as 0 and are left unwritten; a half with no lane in `m` is
  // not touched at all (it may lie past the array's end).
  static V load(const float* p, Mask m) {
    return {Lanes256::load(p, m.lo), any(m.hi) ? Lanes256::load(p + 8, m.hi) : _mm256_setzero_ps()};
  }
  static void store(float* p, Mask m, V v) {
    Lanes256::store(p, m.lo, v.lo);
    if (any(m.hi)) Lanes256::store(p + 8, m.hi, v.hi);
  }
  static V fmadd(V a, V b, V c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static V add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static V sub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static V mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static V mul_rounded(V a, V b) {
    return {Lanes256::mul_rounded(a.lo, b.lo), Lanes256::mul_rounded(a.hi, b.hi)};
  }
  static float sum(V v) { return Lanes256::sum(_mm256_add_ps(v.lo, v.hi)); }
  static V max(V a, V b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
  static float max_of(V v) { return Lanes256::max_of(_mm256_max_ps(v.lo, v.hi)); }
  static V keep_marked(V marks, V v, V otherwise) {
    return {Lanes256::keep_marked(marks.lo, v.lo, otherwise.lo),
            Lanes256::keep_marked(marks.hi, v.hi, otherwise.hi)};
  }
  static V select(Mask m, V v, V otherwise) {
    return {Lanes256::select(m.lo, v.lo, otherwise.lo), Lanes256::select(m.hi, v.hi, otherwise.hi)};
  }
  static Mask marked(const float* marks, Mask within) {
    return {Lanes256::marked(marks, within.lo),
            any(within.hi) ? Lanes256::marked(marks + 8, within.hi) : within.hi};
  }
  // out[c] lane r = rows[r] lane c, as four 8 × 8 blocks: out[c] for c < 8 holds column c of the
  // low halves (rows 0-7, then 8-15), out[8 + c] column c of the high halves.
  static void transpose(const V (&rows)[16], V (&out)[16]) {
    for (int half = 0; half < 2; ++half) {       // which half of the rows' lanes (columns)
      for (int block = 0; block < 2; ++block) {  // rows 0-7 or 8-15
        __m256 in[8], t[8];
        for (int r = 0; r < 8; ++r) in[r] = half ? rows[8 * block + r].hi : rows[8 * block + r].lo;
        Lanes256::transpose(in, t);
        for (int c = 0; c < 8; ++c) (block ? out[8 * half + c].hi : out[8 * half + c].lo) = t[c];
      }
    }
  }

 private:
  static bool any(Lanes256::Mask m) { return m.whole || !_mm256_testz_si256(m.bits, m.bits); }
  static void aligned(const float* p) {
    if (reinterpret_cast<uintptr_t>(p) % 64 != 0) __builtin_trap();
  }
};

}  // namespace mixlab::cpu
