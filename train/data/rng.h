// A small deterministic PRNG for data generation and splits. std::uniform_int_distribution and
// std::shuffle differ across standard libraries, so a generated data set or a "seeded" split would
// change with the compiler; everything here is specified bit for bit instead.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/random.h"

namespace mixlab {

// SplitMix64 (Steele, Lea and Flood 2014): one 64-bit state, good statistical quality, and the
// same sequence on every platform. A sequential stream over the same formula as the counter-based
// Generator (core/random.h's mix64): next() is mix64 of the state, then the state advances.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    const uint64_t out = mix64(state_);
    state_ += kSplitMix64Increment;
    return out;
  }

  // Uniform in [0, n) for n >= 1, by rejection so that no value is favoured. (Generator::below
  // is the plain modulo, a different stream: the two must not be swapped.)
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: the biased low end to reject
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

  // Uniform in [lo, hi], both inclusive.
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Fisher-Yates, from the back.
  template <typename T>
  void shuffle(std::vector<T>& values) {
    for (size_t i = values.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(below(i));
      std::swap(values[i - 1], values[j]);
    }
  }

 private:
  uint64_t state_;
};

}  // namespace mixlab
