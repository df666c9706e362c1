// A seeded, counter-based random generator. Its whole state is (seed, counter), so it is
// trivially saved in a checkpoint and restored for an exact resume, and draws do not depend on
// the standard library's distributions (which differ between implementations).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace mixlab {

// SplitMix64's increment (2^64 / golden ratio) and its finaliser: a strong 64-bit mix; the
// counter-based RNGs on CPU and GPU (compiled for both: backends/cuda/random.cu) and the
// sequential SplitMix64 (train/data/rng.h) all use it.
inline constexpr uint64_t kSplitMix64Increment = 0x9E3779B97F4A7C15ull;
MIXLAB_HOST_DEVICE uint64_t mix64(uint64_t x) {
  x += kSplitMix64Increment;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Dropout's draws: element i of the mask keyed by `seed` is kept when its 32 bits,
//   dropout_bits(dropout_block_key(mix64(seed), i >> 32), low 32 bits of i),
// are at least dropout_threshold(p), i.e. when bits·2⁻³² ≥ p. A pure integer function of
// (seed, i), compiled for host and device, so every backend draws the same mask. One 32-bit hash
// per element, and one 64-bit mix per 2³² elements: AVX2 has no 64-bit multiply, and with mix64 per
// element (two 64-bit multiplies, three 32-bit ones each) dropout's draws took about 2% of the
// d=256 translator's step on a 2-core Zen 2; the compiler vectorises this one on its own, 8 or 16
// elements a register.
//
// hash32 is Chris Wellons's "lowbias32" (hash-prospector): a bijection of 32-bit integers whose
// every input bit flips each output bit with probability within 0.2% of one half.
MIXLAB_HOST_DEVICE uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  return x ^ (x >> 16);
}

// The key of indices [block·2³², (block + 1)·2³²) of the mask whose seed mixes to mixed_seed.
MIXLAB_HOST_DEVICE uint32_t dropout_block_key(uint64_t mixed_seed, uint64_t block) {
  return static_cast<uint32_t>(mix64(mixed_seed ^ block) >> 32);
}

MIXLAB_HOST_DEVICE uint32_t dropout_bits(uint32_t block_key, uint32_t low) {
  return hash32(block_key ^ low);
}

// The least k with k·2⁻³² ≥ p: 0 when p ≤ 0 (every element kept), 2³² when p ≥ 1 and UINT64_MAX
// for a NaN p (none kept, as bits·2⁻³² ≥ NaN is false). p·2³² is exact in double. (Host only: the
// kernels are given it.)
inline uint64_t dropout_threshold(double p) {
  if (std::isnan(p)) return UINT64_MAX;
  if (p <= 0) return 0;
  if (p >= 1) return uint64_t(1) << 32;
  return static_cast<uint64_t>(std::ceil(p * 4294967296.0));
}

// Whether element i is kept (threshold: dropout_threshold(p)).
MIXLAB_HOST_DEVICE bool dropout_kept(uint64_t mixed_seed, uint64_t i, uint64_t threshold) {
  return dropout_bits(dropout_block_key(mixed_seed, i >> 32), static_cast<uint32_t>(i)) >=
         threshold;
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}

  uint64_t next_u64() { return mix64(mix64(seed_) ^ counter_++); }
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal();  // standard normal (Box-Muller, one value per call)
  // Integer in [0, n) by plain modulo (0 for n = 0): slightly biased for large n, and a different
  // stream from SplitMix64::below's rejection sampling; kept so every seeded stream stays the same.
  uint64_t below(uint64_t n) { return n ? next_u64() % n : 0; }

  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_state(uint64_t seed, uint64_t counter) {
    seed_ = seed;
    counter_ = counter;
  }

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

// Named seed derivations (their values are part of every checkpoint's numbers: do not change).
// The seed of one part of a model (a mixer: `salt` tells layers and roles apart) from the model's.
inline uint64_t part_seed(uint64_t model_seed, uint64_t salt) {
  return model_seed * 1000003ull + salt;
}
// The seed of a held-out split drawn from a data seed, apart from the seed's other streams.
inline uint64_t holdout_seed(uint64_t data_seed) { return data_seed ^ 0x5eedull; }

// The process-wide generator used when none is passed (parameter init, dropout seeds).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace mixlab
