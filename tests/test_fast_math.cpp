// The float32 exp used by the CPU kernels with non-finite inputs: a NaN activation must come out
// as NaN (so a diverged run is visible, and a sanitizer build does not stop on the float-to-int
// conversion inside fast_expf), -inf must give 0 and an overflow +inf, as libm's expf. The row
// maximum in lanes (row_max) is the scalar chain's, NaN skipped, on every row length.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/ops.h"
#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/row_max.h"

using namespace mixlab;

namespace {
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("fast math: fast_expf propagates NaN, underflows to 0 and overflows to infinity") {
  CHECK(std::isnan(cpu::fast_expf(kNaNf)));
  CHECK(std::isnan(cpu::fast_expf(-kNaNf)));
  CHECK(cpu::fast_expf(-kInf) == 0.0f);
  CHECK(cpu::fast_expf(-104.0f) == 0.0f);
  CHECK(cpu::fast_expf(-88.0f) == doctest::Approx(std::exp(-88.0)).epsilon(1e-5));  // subnormal
  CHECK(cpu::fast_expf(88.5f) == doctest::Approx(std::exp(88.5)).epsilon(1e-6));    // near FLT_MAX
  CHECK(cpu::fast_expf(88.8f) == kInf);  // exp(88.8) is beyond float's largest
  CHECK(cpu::fast_expf(kInf) == kInf);
  CHECK(cpu::fast_expf(1.0f) == doctest::Approx(std::exp(1.0)).epsilon(1e-6));
}

TEST_CASE("fast math: NaN elements stay NaN through the vectorised float32 kernels") {
  // 37 elements, so the NaNs fall both in full vector lanes and in the scalar tail.
  std::vector<float> xs(37);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = -3.0f + 0.17f * static_cast<float>(i);
  for (size_t i : {0, 5, 17, 36}) xs[i] = kNaNf;
  Tensor t = Tensor::from_data(xs, {static_cast<int64_t>(xs.size())});
  struct Kernel {
    const char* name;
    Tensor (*fn)(const Tensor&);
  };
  const Kernel kernels[] = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
  };
  for (const Kernel& k : kernels) {
    auto y = k.fn(t).to_float_vector();
    for (size_t i = 0; i < xs.size(); ++i) {
      INFO(k.name << " element " << i << " input " << xs[i] << " output " << y[i]);
      CHECK(std::isnan(y[i]) == std::isnan(xs[i]));
    }
  }
}

TEST_CASE("fast math: row_max in lanes equals the scalar chain on every length, NaN skipped") {
  for (int64_t n = 0; n <= 70; ++n) {
    CAPTURE(n);
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = std::sin(1.7f * static_cast<float>(i)) * 10.0f;
    auto chain = [&] {
      float hi = -kInf;
      for (float v : x) hi = v > hi ? v : hi;
      return hi;
    };
    CHECK(mixlab::cpu::row_max(x.data(), n) == chain());
    if (n == 0) continue;
    x[static_cast<size_t>(n - 1)] = 1000.0f;  // the largest in the tail, after the lanes
    CHECK(mixlab::cpu::row_max(x.data(), n) == 1000.0f);
    x[0] = kNaNf;  // skipped, as the chain skips it
    CHECK(mixlab::cpu::row_max(x.data(), n) == chain());
    std::vector<float> empty_row(static_cast<size_t>(n), -kInf);
    CHECK(mixlab::cpu::row_max(empty_row.data(), n) == -kInf);
  }
}
