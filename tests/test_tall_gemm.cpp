// The tall product (backends/cpu/simd/tall_gemm.h), through the CPU backend's gemm: every shape
// family it takes (rows not a multiple of its 6-row tiles, columns not a multiple of its
// panels (64 columns with AVX-512, 16 with AVX2) or of a register, short and long inner axes, B
// stored either way, operands inside wider rows, a batch), alpha and beta, against float64; beta
// 0 never reads C; the same bits on 1, 2 and 3 threads. Without AVX2 or AVX-512 the backend sends
// these products to OpenBLAS and the test reports itself skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/simd/core_peak.h"
#include "backends/cpu/simd/kernel_registers.h"
#include "backends/cpu/simd/tall_gemm.h"
#include "core/parallel.h"
#include "core/sanitizers.h"
#include "tests/gemm_operands.h"
#include "tests/skip.h"

using namespace mixlab;

namespace {

struct TallCase {
  int64_t m, n, k;
  bool trans_b;
  double alpha, beta;
  int64_t pad = 0;  // extra elements at the end of every row of A, B and C
  int64_t batch = 1;
};

// The product of a case (its operands filled by gemm_operands).
testing::GemmOperands make_tall(const TallCase& t) {
  GemmArgs g;
  g.dtype = DType::F32;
  g.m = t.m, g.n = t.n, g.k = t.k;
  g.trans_b = t.trans_b;
  g.lda = t.k + t.pad;
  g.ldb = (t.trans_b ? t.k : t.n) + t.pad;
  g.ldc = t.n + t.pad;
  g.stride_a = t.m * g.lda;
  g.stride_b = (t.trans_b ? t.n : t.k) * g.ldb;
  g.stride_c = t.m * g.ldc;
  g.batch = t.batch;
  g.alpha = t.alpha, g.beta = t.beta;
  return testing::gemm_operands(g);
}

std::vector<float> run_tall(const TallCase& t, int threads) {
  return testing::backend_product(make_tall(t), threads);
}

void check_tall_against_float64(const TallCase& t, const std::vector<float>& got) {
  testing::check_product_against_float64(make_tall(t), got);
}

bool tall_path_taken(const TallCase& t) { return cpu::tall_gemm_fits(make_tall(t).g); }

}  // namespace

// The kernel is compiled where the CPU kernels have AVX2 or AVX-512; there it must take its
// shapes.
void skip_without_tall_kernel() {
  if (std::string(cpu::kernel_registers()) == "generic")
    MIXLAB_SKIP_TEST("CPU kernels built without AVX2 or AVX-512");
}

TEST_CASE("tall gemm: every shape family against float64, the same bits on 1, 2 and 3 threads") {
  skip_without_tall_kernel();
  const std::vector<TallCase> cases = {
      {256, 64, 128, true, 1.0, 0.0},       // one full panel; 42 tiles of 6 rows and one of 4
      {263, 17, 7, false, 1.0, 0.0},        // 5 leftover rows; one column past a register
      {300, 200, 128, true, 1.0, 0.0},      // 3 full panels and an 8-column one
      {257, 65, 300, false, 0.5, 1.0},      // a 1-column last panel; accumulate into C
      {1000, 128, 512, true, 1.0, -0.75},   // beta neither 0 nor 1
      {258, 48, 1, true, 2.0, 0.0},         // k = 1; 3 registers of one panel
      {270, 100, 33, false, 1.0, 0.0, 5},   // rows of A, B and C wider than the product
      {256, 80, 64, true, 1.0, 1.0, 3, 2},  // a batch of 2, padded rows
      {1536, 1024, 256, true, 1.0, 0.0},    // the d=256 translator's FFN
  };
  for (const TallCase& t : cases) {
    INFO("m " << t.m << " n " << t.n << " k " << t.k << " trans_b " << t.trans_b << " alpha "
              << t.alpha << " beta " << t.beta << " pad " << t.pad << " batch " << t.batch);
    REQUIRE(tall_path_taken(t));
    const std::vector<float> one = run_tall(t, 1);
    check_tall_against_float64(t, one);
    CHECK(run_tall(t, 2) == one);
    CHECK(run_tall(t, 3) == one);
  }
}

TEST_CASE("tall gemm: beta 0 writes C without reading it, NaN and all") {
  skip_without_tall_kernel();
  const TallCase t{300, 70, 40, true, 1.0, 0.0};
  REQUIRE(tall_path_taken(t));
  testing::GemmOperands o = make_tall(t);
  std::fill(o.c.begin(), o.c.end(), std::numeric_limits<float>::quiet_NaN());
  for (float v : testing::backend_product(o, 1)) REQUIRE(std::isfinite(v));
}

TEST_CASE("tall gemm: products outside its shapes stay with OpenBLAS") {
  CHECK_FALSE(cpu::tall_gemm_fits(make_tall({255, 64, 64, false, 1, 0}).g));     // too few rows
  CHECK_FALSE(cpu::tall_gemm_fits(make_tall({512, 15, 64, false, 1, 0}).g));     // too few columns
  CHECK_FALSE(cpu::tall_gemm_fits(make_tall({512, 64, 1025, false, 1, 0}).g));   // k too long
  CHECK_FALSE(cpu::tall_gemm_fits(make_tall({512, 2048, 256, false, 1, 0}).g));  // panels past 1 MB
  GemmArgs transposed_a = make_tall({512, 64, 64, false, 1, 0}).g;
  transposed_a.trans_a = true;  // a weight's gradient, dYᵀ X: long k, split along it instead
  CHECK_FALSE(cpu::tall_gemm_fits(transposed_a));
  GemmArgs f64 = make_tall({512, 64, 64, false, 1, 0}).g;
  f64.dtype = DType::F64;
  CHECK_FALSE(cpu::tall_gemm_fits(f64));
}

// bench_matmul prints every product's share of the core's multiply-add peak: the peak must be
// measured on registers alone (more than any kernel that also loads), and the register tile,
// its data in L1, must come close to it without passing it. Wide bounds: a shared VM's clock
// moves between the two measurements.
TEST_CASE("core peak: the register tile runs near, and not above, the multiply-add peak") {
  if (std::string(cpu::kernel_registers()) == "generic") {
    CHECK(cpu::measure_core_peak(0.01).fma_gflops == 0);
    MIXLAB_SKIP_TEST("generic build: no register kernels to measure");
  }
  const cpu::CorePeak peak = cpu::measure_core_peak(0.2);
  MESSAGE("multiply-add peak " << peak.fma_gflops << " GFLOP/s, tile " << peak.tile_gflops);
  CHECK(peak.fma_gflops > 1.0);
  // Every load checked (sanitizers), or a tile of 48 AVX2 registers in AVX2's 16 (16 lanes
  // emulated, lanes16_emulated.h): the tile's rate says nothing there.
  const bool rate_means_nothing =
      MIXLAB_ASAN || MIXLAB_TSAN ||
      std::string(cpu::kernel_registers()).find("emulated") != std::string::npos;
  if (rate_means_nothing)
    CHECK(peak.tile_gflops > 0);
  else
    CHECK(peak.tile_gflops > 0.3 * peak.fma_gflops);
  CHECK(peak.tile_gflops < 1.3 * peak.fma_gflops);
}
