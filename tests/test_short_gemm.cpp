// The short product (backends/cpu/simd/short_gemm.h), through the CPU backend's gemm: the
// per-example token-by-token products of the mixers (gMLP's W Z, Wᵀ dY, dY Zᵀ; the synthesizer's R
// V per head inside wider rows; Linformer's E K) and the edges of its shapes (rows dealt over tiles
// unevenly, columns past a register or a panel, k not a multiple of a register with B stored
// transposed, A shared by every item, A stored either way), alpha and beta, against float64 and
// bit for bit against the kernel called on each item itself (so the backend must route them
// there); the same bits on 1, 2 and 3 threads; beta 0 never reads C; a grid summed over its outer
// level. Without AVX2 or AVX-512 the backend sends these products to OpenBLAS and the tests
// report themselves skipped.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/simd/kernel_registers.h"
#include "backends/cpu/simd/short_gemm.h"
#include "core/parallel.h"
#include "tests/gemm_operands.h"
#include "tests/skip.h"

using namespace mixlab;

namespace {

struct ShortCase {
  int64_t m, n, k;
  bool trans_a, trans_b;
  double alpha = 1.0, beta = 0.0;
  int64_t batch = 3;
  bool shared_a = false;  // one A for every item (stride 0)
  int64_t pad = 0;        // extra elements at the end of every row of A, B and C
};

testing::GemmOperands short_operands(const ShortCase& t) {
  GemmArgs g;
  g.dtype = DType::F32;
  g.trans_a = t.trans_a, g.trans_b = t.trans_b;
  g.m = t.m, g.n = t.n, g.k = t.k;
  g.lda = (t.trans_a ? t.m : t.k) + t.pad;
  g.ldb = (t.trans_b ? t.k : t.n) + t.pad;
  g.ldc = t.n + t.pad;
  g.stride_a = (t.trans_a ? t.k : t.m) * g.lda;  // (filled for every item, read as one if shared)
  g.stride_b = (t.trans_b ? t.n : t.k) * g.ldb;
  g.stride_c = t.m * g.ldc;
  g.batch = t.batch;
  g.alpha = t.alpha, g.beta = t.beta;
  testing::GemmOperands o = testing::gemm_operands(g);
  if (t.shared_a) o.g.stride_a = 0;
  return o;
}

// C after short_gemm itself on each item, on this thread.
std::vector<float> direct(const ShortCase& t) {
  testing::GemmOperands o = short_operands(t);
  const GemmArgs& g = o.g;
  for (int64_t i = 0; i < g.batch; ++i)
    cpu::short_gemm(g.m, g.n, g.k, static_cast<float>(g.alpha), o.a.data() + i * g.stride_a, g.lda,
                    g.trans_a, o.b.data() + i * g.stride_b, g.ldb, g.trans_b,
                    static_cast<float>(g.beta), o.c.data() + i * g.stride_c, g.ldc);
  return o.c;
}

void skip_without_short_kernel() {
  if (std::string(cpu::kernel_registers()) == "generic")
    MIXLAB_SKIP_TEST("CPU kernels built without AVX2 or AVX-512");
}

}  // namespace

TEST_CASE("short gemm: the mixers' items and the edges against float64, routed, on 1-3 threads") {
  skip_without_short_kernel();
  const std::vector<ShortCase> cases = {
      {49, 256, 49, false, false, 1.0, 0.0, 4, true},     // gMLP's W Z
      {49, 256, 49, true, false, 1.0, 0.0, 4, true},      // Wᵀ dY
      {49, 49, 256, false, true},                         // dY Zᵀ: a 1-column last panel
      {49, 32, 49, false, false, 1.0, 0.0, 6, true, 96},  // R V, V inside rows of 128
      {49, 49, 32, false, true, 1.0, 1.0, 5, false, 96},  // dY Vᵀ added to C
      {12, 128, 49, false, false, 1.0, 0.0, 3, true},     // Linformer's E K
      {6, 8, 1, false, false},                            // the smallest: one tile, one register
      {64, 17, 512, true, true, 0.5, -0.75},              // the largest; every operand transposed
      {7, 100, 33, false, false, 2.0, 1.0},               // 7 rows: tiles of 4 and 3
      {23, 9, 13, false, true, 1.0, 0.0, 2, false, 5},    // k and n past a register, padded
      {50, 130, 20, true, true, 1.0, 0.0, 2, false, 3},   // a 2-column last panel, transposed
  };
  for (const ShortCase& t : cases) {
    INFO("m " << t.m << " n " << t.n << " k " << t.k << " trans " << t.trans_a << t.trans_b
              << " alpha " << t.alpha << " beta " << t.beta << " batch " << t.batch << " shared "
              << t.shared_a << " pad " << t.pad);
    REQUIRE(cpu::short_gemm_fits(t.m, t.n, t.k));
    const std::vector<float> one = testing::backend_product(short_operands(t), 1);
    testing::check_product_against_float64(short_operands(t), one);
    CHECK(one == direct(t));
    CHECK(testing::backend_product(short_operands(t), 2) == one);
    CHECK(testing::backend_product(short_operands(t), 3) == one);
  }
}

TEST_CASE("short gemm: beta 0 writes C without reading it, NaN and all") {
  skip_without_short_kernel();
  const ShortCase t{30, 40, 20, false, true};
  testing::GemmOperands o = short_operands(t);
  std::fill(o.c.begin(), o.c.end(), std::numeric_limits<float>::quiet_NaN());
  for (float v : testing::backend_product(o, 1)) REQUIRE(std::isfinite(v));
}

// A shared operand's gradient (the synthesizer's dR over a batch of 3 examples and 2 heads):
// C_h = alpha Σ_o A_(o,h) B_(o,h)ᵀ + beta C_h, each item through the kernel with beta 1 after
// the first.
TEST_CASE("short gemm: a grid summed over its outer level against float64, on 1-3 threads") {
  skip_without_short_kernel();
  const int64_t outer = 3, heads = 2, m = 49, n = 49, k = 32, ld = heads * k;
  GemmArgs g;
  g.dtype = DType::F32;
  g.trans_b = true;
  g.m = m, g.n = n, g.k = k;
  g.lda = ld, g.ldb = ld, g.ldc = n;
  g.batch = outer * heads, g.inner = heads;
  g.stride_a = k, g.stride_b = k, g.stride_c = m * n;  // heads side by side in a row
  g.outer_stride_a = m * ld, g.outer_stride_b = n * ld, g.outer_stride_c = 0;
  g.alpha = 0.5, g.beta = 1.0;
  REQUIRE(gemm_sums_outer(g));
  // The operands' storage, [outer, rows, heads·k] each: gemm_operands fills stride × batch floats.
  GemmArgs filled = g;
  filled.stride_a = filled.stride_b = outer * m * ld / heads, filled.batch = heads;
  filled.stride_c = m * n;
  testing::GemmOperands o = testing::gemm_operands(filled);
  o.g = g;
  const std::vector<float> one = testing::backend_product(o, 1);
  double worst = 0;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double sum = 0;
        for (int64_t u = 0; u < outer; ++u)
          for (int64_t p = 0; p < k; ++p)
            sum += static_cast<double>(o.a[u * m * ld + r * ld + h * k + p]) *
                   o.b[u * n * ld + c * ld + h * k + p];
        const size_t at = static_cast<size_t>(h * m * n + r * n + c);
        const double expected = 0.5 * sum + o.c[at];
        worst = std::max(worst, std::fabs(one[at] - expected) / (1.0 + std::fabs(expected)));
      }
  CHECK(worst < 2e-5 * std::sqrt(static_cast<double>(outer * k)));
  CHECK(testing::backend_product(o, 2) == one);
  CHECK(testing::backend_product(o, 3) == one);
}

TEST_CASE("short gemm: products outside its shapes stay with OpenBLAS") {
  CHECK_FALSE(cpu::short_gemm_fits(5, 64, 64));    // fewer rows than a tile
  CHECK_FALSE(cpu::short_gemm_fits(65, 64, 64));   // too many rows: the tall kernel's or OpenBLAS's
  CHECK_FALSE(cpu::short_gemm_fits(49, 7, 64));    // fewer columns than a register
  CHECK_FALSE(cpu::short_gemm_fits(49, 64, 513));  // k too long
}
