// Compiled with the CPU kernels' flags (cmake/layers.cmake): it measures their registers.
#include "backends/cpu/simd/core_peak.h"

#include "backends/cpu/simd/simd_lanes.h"

#if defined(MIXLAB_HAS_LANES)
#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cpu/simd/register_tile.h"
#endif

namespace mixlab::cpu {

#if defined(MIXLAB_HAS_LANES)
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// `rounds` rounds of 12 independent multiply-add chains (12 registers), so that each chain's
// latency (4-5 cycles) is hidden behind the others. x and y come from memory the compiler
// cannot see through, and the sums are returned, so nothing folds away.
float fma_chains(long rounds, const volatile float* inputs) {
  using L = Lanes;
  const L::V x = L::set1(inputs[0]), y = L::set1(inputs[1]);
  L::V acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = L::set1(inputs[2] * static_cast<float>(i));
  for (long r = 0; r < rounds; ++r) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = L::fmadd(acc[i], x, y);
  }
  float total = 0;
  float lanes[L::kWidth];
  for (int i = 0; i < 12; ++i) {
    L::store(lanes, L::all(), acc[i]);
    total += lanes[0];
  }
  return total;
}

template <int R, int W>
struct PeakTile {
  static void run(const float* a, int64_t lda, const float* panel, int64_t k, float* c,
                  const Lanes::Mask* masks) {
    const auto element = [a, lda](int r, int64_t p) { return a[r * lda + p]; };
    multiply_tile<R, W>(element, panel, k, c, kTilePanel, masks, 1.0f, 0.0f, false);
  }
};

// Best GFLOP/s of each of two workloads over `repeat` timed runs taken in turn (f, g, f, g, ...),
// each run doing `f_flops` or `g_flops`. On a shared machine the clock and a neighbour's load
// (an SMT sibling's, too) change from one moment to the next; taking turns exposes both
// workloads to the same moments, so their ratio stays meaningful.
template <typename F, typename G>
std::pair<double, double> best_rates_in_turn(F&& f, double f_flops, G&& g, double g_flops,
                                             int repeat) {
  f();
  g();
  double best_f = 1e30, best_g = 1e30;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = Clock::now();
    f();
    best_f = std::min(best_f, seconds_since(t0));
    t0 = Clock::now();
    g();
    best_g = std::min(best_g, seconds_since(t0));
  }
  return {f_flops / best_f * 1e-9, g_flops / best_g * 1e-9};
}

}  // namespace

CorePeak measure_core_peak(double seconds) {
  constexpr int kRepeat = 10;
  const double slice = seconds / (2 * kRepeat);
  CorePeak peak;
  volatile float inputs[3] = {0.999f, 1e-4f, 1e-3f};
  volatile float sink = 0;
  // Size each run to about `slice` from a first short one.
  const auto calibrate = [slice](auto&& run_units, double& units) {
    units = 1000;
    const auto t0 = Clock::now();
    run_units(units);
    units = std::max(1000.0, units * slice / std::max(seconds_since(t0), 1e-9));
  };
  double rounds = 0;
  const auto run_chains = [&](double n) { sink = sink + fma_chains(static_cast<long>(n), inputs); };
  calibrate(run_chains, rounds);

  // The tile over a panel of B of 16 KB (k steps of kTilePanel floats) and kTileRows rows of A:
  // both stay in L1.
  const int64_t k = 16384 / (4 * kTilePanel);
  std::vector<float> a_buffer, panel_buffer, c_buffer;
  float* a = aligned_scratch(a_buffer, kTileRows * k);
  float* panel = aligned_scratch(panel_buffer, k * kTilePanel);
  float* c = aligned_scratch(c_buffer, kTileRows * kTilePanel);
  std::fill_n(a, kTileRows * k, 1e-3f);
  std::fill_n(panel, k * kTilePanel, 1e-3f);
  const PanelMasks masks(kTilePanel);
  const auto tile = tile_of<PeakTile>(kTileRows, kTileVectors);
  double tiles = 0;
  const auto run_tiles = [&](double n) {
    for (long i = 0; i < static_cast<long>(n); ++i) tile(a, k, panel, k, c, masks.full);
    sink = sink + c[0];
  };
  calibrate(run_tiles, tiles);
  std::tie(peak.fma_gflops, peak.tile_gflops) = best_rates_in_turn(
      [&] { run_chains(rounds); }, 2.0 * 12 * Lanes::kWidth * rounds, [&] { run_tiles(tiles); },
      2.0 * kTileRows * kTilePanel * static_cast<double>(k) * tiles, kRepeat);
  return peak;
}

#else  // a generic build: no registers of the kernels' own to measure

CorePeak measure_core_peak(double) { return {}; }

#endif

}  // namespace mixlab::cpu
