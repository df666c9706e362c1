// Dropout's draws (core/random.h): the keep rate is 1 - p, neighbouring elements and the masks of
// neighbouring seeds are independent, the thresholds at the edges of p keep all or nothing, and
// the CPU's vectorised runs (backends/cpu/dropout_runs.h) give the formula's factors element by
// element, across a 2³² boundary of the index too (where the block key changes).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/dropout_runs.h"
#include "backends/fused_ops.h"
#include "core/random.h"

using namespace mixlab;

namespace {

// Kept flags of elements first .. first + n - 1 of the mask of `seed`, by the formula.
std::vector<bool> kept_flags(uint64_t seed, uint64_t first, int64_t n, double p) {
  const uint64_t mixed = mix64(seed), threshold = dropout_threshold(p);
  std::vector<bool> kept(n);
  for (int64_t i = 0; i < n; ++i) kept[i] = dropout_kept(mixed, first + i, threshold);
  return kept;
}

// A count's distance from its expectation n·q, in standard deviations of a binomial.
double sigmas(int64_t count, int64_t n, double q) {
  return std::fabs(count - n * q) / std::sqrt(n * q * (1 - q));
}

}  // namespace

TEST_CASE("dropout draws: each element is kept with probability 1 - p, independently") {
  const int64_t n = 1 << 20;
  for (double p : {0.1, 0.5, 0.9}) {
    CAPTURE(p);
    const std::vector<bool> a = kept_flags(7, 0, n, p), b = kept_flags(8, 0, n, p);
    int64_t kept = 0, both_neighbours = 0, both_seeds = 0;
    for (int64_t i = 0; i < n; ++i) {
      kept += a[i];
      both_seeds += a[i] && b[i];
      if (i + 1 < n) both_neighbours += a[i] && a[i + 1];
    }
    const double q = 1 - p;
    CHECK(sigmas(kept, n, q) < 5);
    CHECK(sigmas(both_neighbours, n - 1, q * q) < 5);  // element i and i + 1 of one mask
    CHECK(sigmas(both_seeds, n, q * q) < 5);           // element i of seeds 7 and 8
  }
}

TEST_CASE("dropout draws: the bits are uniform over 64 buckets, far into the index range") {
  // Top 6 bits of each element's draw, at the start and just past 2^32 and 2^40 (other keys).
  for (uint64_t first : {uint64_t(0), uint64_t(1) << 32, (uint64_t(1) << 40) + 12345}) {
    CAPTURE(first);
    const int64_t n = 1 << 18;
    std::vector<int64_t> buckets(64, 0);
    const uint64_t mixed = mix64(99);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t index = first + i;
      ++buckets[dropout_bits(dropout_block_key(mixed, index >> 32), uint32_t(index)) >> 26];
    }
    double chi2 = 0;
    for (int64_t c : buckets) chi2 += (c - n / 64.0) * (c - n / 64.0) / (n / 64.0);
    CHECK(chi2 < 120);  // 63 degrees of freedom: the 99.999th percentile is about 118
  }
}

TEST_CASE("dropout draws: p of 0 keeps all, p of 1 and NaN keep nothing") {
  const uint64_t mixed = mix64(3);
  CHECK(dropout_threshold(0.0) == 0);
  CHECK(dropout_threshold(-1.0) == 0);
  CHECK(dropout_threshold(1.0) == uint64_t(1) << 32);
  CHECK(dropout_threshold(std::nan("")) == UINT64_MAX);
  CHECK(dropout_threshold(0.5) == uint64_t(1) << 31);  // bits ≥ 2^31: u = bits·2^-32 ≥ 0.5
  for (uint64_t i = 0; i < 1000; ++i) {
    CHECK(dropout_kept(mixed, i, dropout_threshold(0.0)));
    CHECK_FALSE(dropout_kept(mixed, i, dropout_threshold(1.0)));
    CHECK_FALSE(dropout_kept(mixed, i, dropout_threshold(std::nan(""))));
  }
}

TEST_CASE("dropout draws: the CPU's runs give the formula's factors, across a 2^32 boundary") {
  // 1000 elements from 2^32 - 497: the run is cut at 2^32 into two keys.
  const uint64_t first = (uint64_t(1) << 32) - 497;
  const int64_t n = 1000;
  std::vector<float> x(n), y(n), h(n), s(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 1.0f + 0.001f * i, h[i] = 0.5f - 0.002f * i;
  for (double p : {0.0, 0.3, 1.0, std::nan("")}) {
    CAPTURE(p);
    const uint64_t mixed = mix64(42), threshold = dropout_threshold(p);
    const float keep = fused::dropout_keep<float>(p);
    const cpu::RunFactors<float> factors(threshold, keep);
    int runs = 0;
    cpu::for_each_key_run(
        mixed, first, first + n, [&](uint32_t key, uint32_t low, uint64_t at, uint64_t count) {
          ++runs;
          cpu::dropout_run(x.data() + at, y.data() + at, int64_t(count), key, low, factors);
          cpu::add_dropout_run(x.data() + at, h.data() + at, s.data() + at, int64_t(count), key,
                               low, factors);
        });
    CHECK(runs == 2);
    int64_t wrong = 0, kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float f = fused::dropout_factor<float>(mixed, first + i, threshold, keep);
      kept += f != 0;
      wrong += y[i] != x[i] * f;
      wrong += s[i] != std::fma(h[i], f, x[i]) && s[i] != x[i] + h[i] * f;
    }
    CHECK(wrong == 0);
    if (p == 0.3) CHECK(sigmas(kept, n, 0.7) < 5);
  }
}
