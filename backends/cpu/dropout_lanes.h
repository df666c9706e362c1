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

#if defined(__AVX512F__) && defined(__AVX512DQ__)
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
#endif

}  // namespace mixlab::cpu
