// How fast one core of this machine can multiply-add, measured, for the benchmarks to print
// their products' rates against (bench/bench_matmul.cpp): a product kernel's GFLOP/s means
// little without the core's own ceiling beside it, and a VM's clock and a vendor's datasheet
// are not that ceiling.
#pragma once

namespace mixlab::cpu {

struct CorePeak {
  // Fused multiply-adds on registers alone (kernel_registers()' width; 12 independent chains,
  // enough to hide their latency): the arithmetic ceiling. 0 in a generic build.
  double fma_gflops = 0;
  // The product kernels' register tile (register_tile.h: kTileRows × kTileVectors registers of
  // C, a panel of B and A's rows all in L1): the rate those kernels reach with no memory
  // traffic, their practical ceiling. 0 in a generic build.
  double tile_gflops = 0;
};

// Each figure is the best of 10 runs of about `seconds` / 20 each, on the calling thread; the
// two workloads' runs take turns, so a shared machine's changing load reaches both alike.
CorePeak measure_core_peak(double seconds = 0.3);

}  // namespace mixlab::cpu
