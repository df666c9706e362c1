// Non-finite and extreme values through the elementwise and reduction kernels: every backend of
// the build against the reference backend (plain loops, IEEE arithmetic) in the same dtype.
//
// The CPU kernels are compiled with -fassociative-math and -fno-signed-zeros (cmake/layers.cmake)
// so that their loops vectorise. Those flags let the compiler rewrite an expression into one that
// is equal for finite numbers only: relu's gradient, written as dy times a 0/1 step, became a
// select that returned 0 for a NaN dy on AVX-512. A kernel that turns a NaN into a number hides a
// diverged run, and one that turns an overflow into a finite number hides it too. So every op of
// MIXLAB_UNARY_OPS and MIXLAB_BINARY_OPS, where, the reductions and sum_squares see NaN, ±inf,
// ±0, a float32 subnormal, values where exp overflows and values beyond float32's range, at
// lengths that fill vector lanes and leave tails. The contract: where the reference gives NaN the
// backend gives NaN, where it gives an infinity the backend gives the same infinity, and a finite
// value is matched to the dtype's tolerance: the op harness's expect_close, against the
// reference in the backend's own dtype (in float64, exp(89.5) is a number; in float32 it is inf).
// A failure names the worst element's index i: its x (or a) is kSpecial[i mod 13], its b
// kSpecial[i / 13].
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "backends/backend.h"
#include "tests/op_harness.h"

using namespace mixlab;
using mixlab::test::expect_close;
using mixlab::test::Tol;

namespace {

const double kNaNValue = std::numeric_limits<double>::quiet_NaN();
const double kInfinity = std::numeric_limits<double>::infinity();

// Thirteen values, so that a cycle of them over 169 elements (ten AVX-512 float32 registers and a
// tail of nine) puts each value both in full lanes and in the tail at every register width:
// NaN, the infinities, both zeros, a float32 subnormal, an ordinary number, exp's largest finite
// float32 result (88.5) and its overflow (89.5, 120), its subnormal results (-89.5) and its
// underflow to 0 (-120), and a float64 number beyond float32's range (1e300).
const std::vector<double> kSpecial = {kNaNValue, kInfinity, -kInfinity, 0.0,   -0.0,   1e-40, -2.5,
                                      88.5,      89.5,      -89.5,      120.0, -120.0, 1e300};
const int64_t kPairs = 169;  // 13 × 13

// Element i of kSpecial[(i / stride) mod 13], n elements.
std::vector<double> cycled(int64_t n, int64_t stride) {
  std::vector<double> v(static_cast<size_t>(n));
  const auto p = static_cast<int64_t>(kSpecial.size());
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = kSpecial[(i / stride) % p];
  return v;
}

Tensor on(const std::vector<double>& values, DType dtype, Device device) {
  return Tensor::from_data(values, {static_cast<int64_t>(values.size())}).to(dtype).to(device);
}

std::vector<Device> fast_devices() {
  std::vector<Device> devices;
  for (Device d : test::available_devices())
    if (d != Device::ref()) devices.push_back(d);
  return devices;
}

// `run(device, dtype)` on every fast backend and dtype, against the reference in that dtype.
template <typename Run>
void like_reference(const std::string& what, Run run) {
  for (Device device : fast_devices())
    for (DType dtype : {DType::F32, DType::F64}) {
      const Tol tol = dtype == DType::F32 ? Tol{2e-6, 1e-6} : Tol{1e-12, 0};
      expect_close(run(Device::ref(), dtype), run(device, dtype), tol,
                   what + " on " + device.str() + " " + dtype_name(dtype));
    }
}

}  // namespace

TEST_CASE("non-finite: every unary op gives the reference's NaNs, infinities and values") {
  for (UnaryOp op : test::all_unary_ops())
    for (int64_t n : {int64_t(13), kPairs}) {
      const double alpha = op == UnaryOp::PowScalar ? 1.7 : -0.37;
      like_reference(std::string(test::unary_name(op)) + " n=" + std::to_string(n),
                     [&](Device d, DType dtype) {
                       Tensor x = on(cycled(n, 1), dtype, d), y = Tensor::empty({n}, dtype, d);
                       backend_for(d).unary(op, x.view(), y.view(), alpha);
                       return y.to_double_vector();
                     });
    }
}

TEST_CASE("non-finite: every binary op gives the reference's NaNs, infinities and values") {
  // a cycles fastest and b slowest: the 169 elements are every pair of special values.
  for (BinaryOp op : test::all_binary_ops())
    like_reference(test::binary_name(op), [&](Device d, DType dtype) {
      Tensor a = on(cycled(kPairs, 1), dtype, d), b = on(cycled(kPairs, 13), dtype, d);
      Tensor out = Tensor::empty({kPairs}, dtype, d);
      backend_for(d).binary(op, a.view(), b.view(), out.view());
      return out.to_double_vector();
    });
}

TEST_CASE("non-finite: where takes a or b by a NaN, infinite or zero condition as the reference") {
  // The condition is kSpecial[i mod 13], a kSpecial[i / 13], b 1.
  like_reference("where", [&](Device d, DType dtype) {
    Tensor cond = on(cycled(kPairs, 1), dtype, d), a = on(cycled(kPairs, 13), dtype, d);
    Tensor b = on(std::vector<double>(kPairs, 1.0), dtype, d);
    Tensor out = Tensor::empty({kPairs}, dtype, d);
    backend_for(d).where(cond.view(), a.view(), b.view(), out.view());
    return out.to_double_vector();
  });
}

TEST_CASE("non-finite: sums, maxima, minima and sum_squares over rows holding one special value") {
  // Row r of [13, 37] holds kSpecial[r] at column (5 r) mod 37 among finite values, and the
  // reductions run along rows (outer = 13, n = 37, inner = 1) and along columns (outer = 1,
  // n = 13, inner = 37): output i of a failure is row i or column i.
  const int64_t rows = 13, cols = 37;
  std::vector<double> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[static_cast<size_t>(r * cols + c)] = c == (5 * r) % cols
                                                 ? kSpecial[static_cast<size_t>(r)]
                                                 : std::sin(0.3 * double(r * cols + c));
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
    for (bool along_rows : {true, false}) {
      const int64_t outer = along_rows ? rows : 1, len = along_rows ? cols : rows;
      const int64_t inner = along_rows ? 1 : cols;
      const char* name = op == ReduceOp::Sum ? "sum" : op == ReduceOp::Max ? "max" : "min";
      like_reference(std::string(name) + (along_rows ? " along rows" : " along columns"),
                     [&](Device d, DType dtype) {
                       Tensor in = on(x, dtype, d);
                       Tensor out = Tensor::empty({outer * inner}, dtype, d);
                       backend_for(d).reduce(op, in.view(), outer, len, inner, out.view());
                       return out.to_double_vector();
                     });
    }
  for (double special : kSpecial) {
    std::vector<double> v(x.begin(), x.begin() + kPairs);
    v[100] = special;
    like_reference("sum_squares with one element " + std::to_string(special),
                   [&](Device d, DType dtype) {
                     Tensor in = on(v, dtype, d), out = Tensor::empty({1}, dtype, d);
                     backend_for(d).sum_squares(in.view(), out.view());
                     return out.to_double_vector();
                   });
  }
}
