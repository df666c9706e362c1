// The long product (backends/cpu/simd/long_gemm.h), a weight's gradient C = alpha·Aᵀ B + beta·C
// with A stored [k, m]: called directly, and through the CPU backend's gemm (with A transposed,
// where the backend also splits k over threads). Every shape family it takes (rows not a multiple
// of its 6-row tiles, columns not a multiple of its 64-column panels or of 16, k not a multiple of
// its 128-step chunks, operands inside wider rows, a batch), alpha and beta, against float64;
// beta 0 never reads C; repeated runs give the same bits. Without AVX-512 the backend sends these
// products to OpenBLAS and the test reports itself skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/simd/long_gemm.h"
#include "core/parallel.h"
#include "tests/gemm_operands.h"
#include "tests/skip.h"

using namespace mixlab;

namespace {

struct Case {
  int64_t m, n, k;
  double alpha, beta;
  int64_t pad = 0;  // extra elements at the end of every row of A, B and C
  int64_t batch = 1;
};

// The product of a case (its operands filled by gemm_operands), A stored [k, m] and passed
// transposed.
testing::GemmOperands long_operands(const Case& t) {
  GemmArgs g;
  g.dtype = DType::F32;
  g.trans_a = true;
  g.m = t.m, g.n = t.n, g.k = t.k;
  g.lda = t.m + t.pad, g.ldb = t.n + t.pad, g.ldc = t.n + t.pad;
  g.stride_a = t.k * g.lda, g.stride_b = t.k * g.ldb, g.stride_c = t.m * g.ldc;
  g.batch = t.batch;
  g.alpha = t.alpha, g.beta = t.beta;
  return testing::gemm_operands(g);
}

// C after the product: through the backend's gemm on `threads` threads, or (threads 0) by
// calling long_gemm itself on each batch item.
std::vector<float> run_long(const Case& t, int threads) {
  testing::GemmOperands o = long_operands(t);
  if (threads > 0) return testing::backend_product(o, threads);
  const GemmArgs& g = o.g;
  for (int64_t i = 0; i < t.batch; ++i)
    cpu::long_gemm(t.m, t.n, t.k, static_cast<float>(t.alpha), o.a.data() + i * g.stride_a, g.lda,
                   o.b.data() + i * g.stride_b, g.ldb, static_cast<float>(t.beta),
                   o.c.data() + i * g.stride_c, g.ldc);
  return o.c;
}

void check_long_against_float64(const Case& t, const std::vector<float>& got) {
  testing::check_product_against_float64(long_operands(t), got);
}

}  // namespace

TEST_CASE("long gemm: every shape family against float64, directly and through the backend") {
  if (!cpu::long_gemm_fits(128, 128, 1024)) MIXLAB_SKIP_TEST("no AVX-512 in this build");
  const std::vector<Case> cases = {
      {16, 16, 256, 1.0, 0.0},        // the smallest: one tile of 6 rows and one of 4, 2 chunks
      {127, 65, 300, 0.5, 1.0},       // 21 tiles and a 1-row one; a 1-column last panel; a
                                      // 44-step last chunk; accumulate into C
      {100, 200, 1000, 1.0, -0.75},   // 3 full panels and an 8-column one; beta neither 0 nor 1
      {48, 17, 257, 2.0, 0.0},        // one column past a register; a 1-step last chunk
      {70, 100, 333, 1.0, 0.0, 5},    // rows of A, B and C wider than the product
      {64, 80, 640, 1.0, 1.0, 3, 2},  // a batch of 2, padded rows
      {128, 128, 1536, 1.0, 0.0},     // the d=128 translator's attention projections
      {40, 48, 3000, 1.0, 0.0},       // long enough that 2 and 3 threads split k
  };
  for (const Case& t : cases) {
    INFO("m " << t.m << " n " << t.n << " k " << t.k << " alpha " << t.alpha << " beta " << t.beta
              << " pad " << t.pad << " batch " << t.batch);
    REQUIRE(cpu::long_gemm_fits(t.m, t.n, t.k));
    const std::vector<float> direct = run_long(t, 0);
    check_long_against_float64(t, direct);
    CHECK(run_long(t, 1) == direct);  // one thread: the backend hands the whole product over
    for (int threads : {2, 3}) {
      const std::vector<float> split = run_long(t, threads);
      check_long_against_float64(t, split);
      CHECK(run_long(t, threads) == split);  // a given thread count repeats bit for bit
    }
  }
}

TEST_CASE("long gemm: beta 0 writes C without reading it, NaN and all") {
  if (!cpu::long_gemm_fits(128, 128, 1024)) MIXLAB_SKIP_TEST("no AVX-512 in this build");
  const Case t{70, 90, 400, 1.0, 0.0};
  testing::GemmOperands o = long_operands(t);
  std::fill(o.c.begin(), o.c.end(), std::numeric_limits<float>::quiet_NaN());
  cpu::long_gemm(t.m, t.n, t.k, 1.0f, o.a.data(), o.g.lda, o.b.data(), o.g.ldb, 0.0f, o.c.data(),
                 o.g.ldc);
  for (float v : o.c) REQUIRE(std::isfinite(v));
}

TEST_CASE("long gemm: products outside its shapes stay with OpenBLAS") {
  CHECK_FALSE(cpu::long_gemm_fits(128, 128, 255));     // k too short
  CHECK_FALSE(cpu::long_gemm_fits(512, 300, 500));     // k shorter than C's larger side
  CHECK_FALSE(cpu::long_gemm_fits(15, 64, 1024));      // too few rows
  CHECK_FALSE(cpu::long_gemm_fits(64, 15, 1024));      // too few columns
  CHECK_FALSE(cpu::long_gemm_fits(1024, 1024, 4096));  // C past 2 MB
}

TEST_CASE("long gemm: RowSums gives a weight's gradient and its bias's, on 1, 2 and 3 threads") {
  // gemm_epilogue(RowSums) on dYᵀ X shapes: the long kernel whole, split along k (2 and 3
  // threads), and OpenBLAS with C's rows or columns split over threads (the sums then taken by
  // one pass per block of rows, or by the first block of columns alone). C against float64 as
  // gemm's; the sums against Σ_k A[k, i] in double.
  for (const Case& t : std::vector<Case>{{40, 48, 3000, 1.0, 0.0},
                                         {127, 65, 300, 1.0, 0.0},
                                         {300, 200, 100, 1.0, 0.0},
                                         {90, 400, 150, 1.0, 0.0}})
    for (int threads : {1, 2, 3}) {
      INFO("m " << t.m << " n " << t.n << " k " << t.k << ", " << threads << " threads");
      testing::GemmOperands o = long_operands(t);
      std::vector<float> sums(static_cast<size_t>(t.m), std::numeric_limits<float>::quiet_NaN());
      o.g.a = o.a.data(), o.g.b = o.b.data(), o.g.c = o.c.data();
      View sums_view;
      sums_view.data = sums.data();
      sums_view.ndim = 1;
      sums_view.shape[0] = t.m;
      sums_view.strides[0] = 1;
      const View unused;  // RowSums takes no bias
      const int saved = num_threads();
      set_num_threads(threads);
      backend_for(Device::cpu()).gemm_epilogue(o.g, GemmEpilogue::RowSums, unused, sums_view);
      set_num_threads(saved);
      check_long_against_float64(t, o.c);
      for (int64_t i = 0; i < t.m; ++i) {
        double want = 0;
        for (int64_t p = 0; p < t.k; ++p) want += o.a[static_cast<size_t>(p * o.g.lda + i)];
        REQUIRE(std::abs(sums[static_cast<size_t>(i)] - want) < 1e-4 * std::sqrt(double(t.k)));
      }
    }
}
