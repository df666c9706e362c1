// Dropout's keep-or-drop decisions 16 elements at a time in AVX-512 registers, the same draws as
// fused::dropout_factor (backends/fused_ops.h): element i is kept when the 53-bit integer of
// mix64(mix64(seed) ^ i) >> 11 is at least dropout_threshold(p). The scalar test u >= p, with
// u that integer times 2⁻⁵³, is the same comparison (p·2⁵³ is exact in double), so the masks
// are the other backends' bit for bit. The compiler's own vectorisation of the scalar formula
// (64-bit integer to double conversions, then a compare) ran 0.62 ns per element of a
// translator's residual; this 0.42.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/random.h"

#if (defined(__AVX512F__) && defined(__AVX512DQ__)) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace mixlab::cpu {

// The least k with k·2⁻⁵³ ≥ p (0 when p ≤ 0, so every element is kept; 2⁵³ when p ≥ 1, none;
// and none for a NaN p, as u >= NaN is false).
inline uint64_t dropout_threshold(double p) {
  if (std::isnan(p)) return UINT64_MAX;
  if (p <= 0) return 0;
  if (p >= 1) return uint64_t(1) << 53;
  return static_cast<uint64_t>(std::ceil(p * 9007199254740992.0));
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// GCC 12 warns that the intrinsics' internal undefined registers may be used uninitialized (GCC
// bug 105593, fixed in GCC 13), as in avx512_math.h; nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace avx512 {

// Bit l set when element first + l is kept (mixed_seed = mix64(seed)).
inline __mmask16 kept_lanes(uint64_t mixed_seed, uint64_t first, uint64_t threshold) {
  const __m512i lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  __mmask8 kept[2];
  for (int half = 0; half < 2; ++half) {
    const __m512i index =
        _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first + 8 * half)), lanes);
    // mix64(mixed_seed ^ index) (core/random.h), in 64-bit lanes.
    __m512i x = _mm512_xor_si512(_mm512_set1_epi64(static_cast<long long>(mixed_seed)), index);
    x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<long long>(kSplitMix64Increment)));
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                           _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull)));
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                           _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull)));
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
    kept[half] = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(x, 11),
                                         _mm512_set1_epi64(static_cast<long long>(threshold)));
  }
  return static_cast<__mmask16>(kept[0] | (static_cast<unsigned>(kept[1]) << 8));
}

// The factors of elements first .. first + 15: keep where kept, 0 elsewhere.
inline __m512 dropout_factors(uint64_t mixed_seed, uint64_t first, uint64_t threshold, float keep) {
  return _mm512_maskz_mov_ps(kept_lanes(mixed_seed, first, threshold), _mm512_set1_ps(keep));
}

}  // namespace avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#elif defined(__AVX2__) && defined(__FMA__)
// Without AVX-512 (AMD Zen 3 and earlier, older Xeons) the same draws 8 elements at a time in
// two 4-lane 64-bit registers. AVX2 has no 64-bit multiply; mix64's two are made of three 32-bit
// ones each. The compiler's vectorisation of the scalar formula took 7% of the translator's step
// on a Zen 3 (dropout_apply and add_dropout_layer_norm).
namespace avx2 {

// The low 64 bits of a · b in each lane, b's halves given (b_low = b, b_high = b >> 32).
inline __m256i mullo64(__m256i a, __m256i b, __m256i b_high) {
  const __m256i low = _mm256_mul_epu32(a, b);
  const __m256i cross =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b), _mm256_mul_epu32(a, b_high));
  return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
}

// All ones in lane l when element first + l is kept (mixed_seed = mix64(seed)), 4 lanes.
// threshold ≤ 2⁵³, so the signed compare is the unsigned one.
inline __m256i kept_quad(uint64_t mixed_seed, uint64_t first, uint64_t threshold) {
  constexpr uint64_t kA = 0xBF58476D1CE4E5B9ull, kB = 0x94D049BB133111EBull;
  const __m256i index = _mm256_add_epi64(_mm256_set1_epi64x(static_cast<long long>(first)),
                                         _mm256_setr_epi64x(0, 1, 2, 3));
  // mix64(mixed_seed ^ index) (core/random.h), in 64-bit lanes.
  __m256i x = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(mixed_seed)), index);
  x = _mm256_add_epi64(x, _mm256_set1_epi64x(static_cast<long long>(kSplitMix64Increment)));
  x = mullo64(_mm256_xor_si256(x, _mm256_srli_epi64(x, 30)),
              _mm256_set1_epi64x(static_cast<long long>(kA)),
              _mm256_set1_epi64x(static_cast<long long>(kA >> 32)));
  x = mullo64(_mm256_xor_si256(x, _mm256_srli_epi64(x, 27)),
              _mm256_set1_epi64x(static_cast<long long>(kB)),
              _mm256_set1_epi64x(static_cast<long long>(kB >> 32)));
  x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));
  const __m256i dropped = _mm256_cmpgt_epi64(_mm256_set1_epi64x(static_cast<long long>(threshold)),
                                             _mm256_srli_epi64(x, 11));
  return _mm256_xor_si256(dropped, _mm256_set1_epi64x(-1));
}

// Whether this path applies: threshold ≤ 2⁵³ (UINT64_MAX, for a NaN p, takes the scalar path).
inline bool lanes_fit(uint64_t threshold) { return threshold <= (uint64_t(1) << 53); }

// The factors of elements first .. first + 7: keep where kept, 0 elsewhere.
inline __m256 dropout_factors(uint64_t mixed_seed, uint64_t first, uint64_t threshold, float keep) {
  const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);  // each lane's low half
  const __m256i low = _mm256_permutevar8x32_epi32(kept_quad(mixed_seed, first, threshold), even);
  const __m256i high =
      _mm256_permutevar8x32_epi32(kept_quad(mixed_seed, first + 4, threshold), even);
  const __m256i kept = _mm256_blend_epi32(low, high, 0xF0);
  return _mm256_and_ps(_mm256_castsi256_ps(kept), _mm256_set1_ps(keep));
}

}  // namespace avx2
#endif

}  // namespace mixlab::cpu
