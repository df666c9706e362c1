// The AVX2 kernels' inline math (backends/cpu/simd/avx2_math.h), called directly: this file is
// compiled with the CPU kernels' flags (CMakeLists.txt), so in a native AVX2 build it sees the
// same header they do. In AVX-512 and generic builds it reports itself skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/simd/avx2_math.h"
#include "tests/skip.h"

// The header declares nothing outside an AVX2 build, so its namespace exists only there.
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
namespace avx2 = mixlab::cpu::avx2;
#endif

// GELU's slope takes exp(-x²/2) with exp_of_normal_range, which leaves out exp_of's clamp and
// its second factor of 2ⁿ: over its range it must give exp_of's bits (so the slope's numbers did
// not move), and NaN must stay NaN.
TEST_CASE("avx2 math: exp over the normal range gives exp_of's bits") {
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> ys{-87.0f, 88.0f, -50.0f, 0.0f, -0.0f, 1e-30f, -1e-30f, nan};
  for (float y = -87.0f; y < 88.0f; y += 0.00037f) ys.push_back(y);
  ys.resize((ys.size() + 7) / 8 * 8, 1.0f);
  int64_t differ = 0, compared = 0;
  for (size_t i = 0; i < ys.size(); i += 8) {
    const __m256 y = _mm256_loadu_ps(ys.data() + i);
    float want[8], got[8];
    _mm256_storeu_ps(want, avx2::exp_of(y));
    _mm256_storeu_ps(got, avx2::exp_of_normal_range(y));
    for (int j = 0; j < 8; ++j) {
      if (std::isnan(ys[i + j])) {
        CHECK(std::isnan(got[j]));
        continue;
      }
      differ += std::memcmp(&want[j], &got[j], sizeof(float)) != 0;
      ++compared;
    }
  }
  CHECK(compared > 400000);
  CHECK(differ == 0);
#else
  MIXLAB_SKIP_TEST("not an AVX2 build of the kernels (AVX-512 or generic)");
#endif
}
