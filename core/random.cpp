#include "core/random.h"

#include <cmath>

namespace mixlab {

double Generator::normal() {
  // Box-Muller; u1 is kept away from 0 so log() is finite.
  double u1 = (static_cast<double>(next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace mixlab
