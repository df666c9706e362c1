// Subnormals flushed inside the kernels (core/float_env.h), and matrix products split over the
// worker pool (backends/cpu/cpu_gemm.cpp): every block lands where it belongs, for each
// transpose layout, and a split product repeats bit for bit.
#include <cmath>

#include "core/float_env.h"
#include "core/parallel.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

float times_one(float x) {
  volatile float one = 1.0f;  // keeps the product at run time, under the current float modes
  return x * one;
}

// op(A) @ op(B) in double from row-major storage, op = transpose when asked.
std::vector<double> reference_product(const std::vector<float>& a, const std::vector<float>& b,
                                      int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[i * n + j] +=
            double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
  return c;
}

}  // namespace

#if defined(__x86_64__) || defined(__i386__)
TEST_CASE("float env: subnormals are flushed inside the guard, and only there") {
  const float tiny = 1e-41f;
  REQUIRE(std::fpclassify(times_one(tiny)) == FP_SUBNORMAL);
  {
    ScopedFlushDenormals flush;
    CHECK(times_one(tiny) == 0.0f);
  }
  CHECK(std::fpclassify(times_one(tiny)) == FP_SUBNORMAL);  // the caller's modes are back
  set_flush_denormals(false);
  {
    ScopedFlushDenormals flush;
    CHECK(std::fpclassify(times_one(tiny)) == FP_SUBNORMAL);
  }
  set_flush_denormals(true);
}

TEST_CASE("float env: a product with subnormal inputs reads them as zero") {
  Tensor a = Tensor::full({1, 1}, 1e-41);
  Tensor b = Tensor::full({1, 1}, 3.0);
  CHECK(matmul(a, b).item() == 0.0);
}
#endif

TEST_CASE("gemm: products split over two threads match a reference and repeat exactly") {
  int saved = num_threads();
  struct Case {
    int64_t m, n, k;
  };
  // Tall (split by rows), wide and short (split by columns), and odd sizes.
  for (Case s : {Case{301, 70, 90}, Case{40, 333, 64}, Case{97, 101, 103}}) {
    for (int layout = 0; layout < 4; ++layout) {
      bool ta = layout & 1, tb = layout & 2;
      INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta << " tb=" << tb);
      Tensor a = rand32(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, 1);
      Tensor b = rand32(tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, 2);
      auto product = [&] {
        return matmul(ta ? transpose(a, 0, 1) : a, tb ? transpose(b, 0, 1) : b).to_float_vector();
      };
      set_num_threads(2);
      std::vector<float> two = product();
      CHECK(product() == two);
      auto want =
          reference_product(a.to_float_vector(), b.to_float_vector(), s.m, s.n, s.k, ta, tb);
      std::vector<double> got(two.begin(), two.end());
      check_close(got, want, 1e-4);
    }
  }
  set_num_threads(saved);
}
