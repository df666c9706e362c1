// A seeded, counter-based random generator. Its whole state is (seed, counter), so it is
// trivially saved in a checkpoint and restored for an exact resume, and draws do not depend on
// the standard library's distributions (which differ between implementations).
#pragma once
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

// Uniform in [0, 1) from the i-th draw of a stream keyed by `seed`: what dropout masks use, so
// any device reproduces the same mask.
MIXLAB_HOST_DEVICE double counter_uniform(uint64_t seed, uint64_t i) {
  return static_cast<double>(mix64(mix64(seed) ^ i) >> 11) * (1.0 / 9007199254740992.0);
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
