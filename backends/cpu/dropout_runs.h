// Dropout's draws (core/random.h) over a range of flat indices, in loops the compiler vectorises:
// the range is cut where the index crosses a multiple of 2³², so that each run has one block key
// and its elements' bits are hash32 of 32-bit integers (8 AVX2 lanes, 16 AVX-512). Each element
// gets fused::dropout_factor's factor, bit for bit.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/random.h"

namespace mixlab::cpu {

// Calls run(key, low, offset, count) for the pieces of [b, e) that share a block key: indices
// b + offset .. b + offset + count - 1, the first of them with low 32 bits `low`.
template <typename Run>
void for_each_key_run(uint64_t mixed_seed, uint64_t b, uint64_t e, const Run& run) {
  for (uint64_t i = b; i < e;) {
    const uint64_t block = i >> 32;
    const uint64_t end = std::min(e, (block + 1) << 32);
    run(dropout_block_key(mixed_seed, block), static_cast<uint32_t>(i), i - b, end - i);
    i = end;
  }
}

// The kept value and a 32-bit threshold that give fused::dropout_factor's factors: a threshold
// past 32 bits (p ≥ 1, or NaN) keeps nothing, which threshold 0 with a kept value of 0 also gives.
template <typename T>
struct RunFactors {
  uint32_t threshold;
  T keep;
  RunFactors(uint64_t threshold64, T kept)
      : threshold(threshold64 > UINT32_MAX ? 0 : static_cast<uint32_t>(threshold64)),
        keep(threshold64 > UINT32_MAX ? T(0) : kept) {}
};

// y[j] = x[j] · factor of element `low + j` of the run (count elements; y may be x). f is taken
// by value: a copy no store to y can alias, so the loop vectorises.
template <typename T>
void dropout_run(const T* x, T* y, int64_t count, uint32_t key, uint32_t low, RunFactors<T> f) {
  for (int64_t j = 0; j < count; ++j)
    y[j] =
        x[j] * (dropout_bits(key, low + static_cast<uint32_t>(j)) >= f.threshold ? f.keep : T(0));
}

// s[j] = x[j] + h[j] · factor (one rounding where the build has FMA, as the CUDA kernel's).
template <typename T>
void add_dropout_run(const T* x, const T* h, T* s, int64_t count, uint32_t key, uint32_t low,
                     RunFactors<T> f) {
  for (int64_t j = 0; j < count; ++j)
    s[j] = x[j] + h[j] * (dropout_bits(key, low + static_cast<uint32_t>(j)) >= f.threshold ? f.keep
                                                                                           : T(0));
}

}  // namespace mixlab::cpu
