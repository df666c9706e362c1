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
// value is matched to the dtype's tolerance.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "backends/backend.h"
#include "tests/op_harness.h"

using namespace mixlab;

namespace {

const double kNaNValue = std::numeric_limits<double>::quiet_NaN();
const double kInfinity = std::numeric_limits<double>::infinity();

// Thirteen values, so that a cycle of them over 169 elements (ten AVX-512 float32 registers and a
// tail of nine) puts each value both in full lanes and in the tail at every register width:
// NaN, the infinities, both zeros, a float32 subnormal, ordinary numbers, exp's largest finite
// float32 result (88.5) and its overflow (89.5, 120), its subnormal results (-89.5) and its
// underflow to 0 (-120), and a float64 number beyond float32's range (1e300).
const std::vector<double> kSpecial = {kNaNValue, kInfinity, -kInfinity, 0.0,   -0.0,   1e-40, -2.5,
                                      88.5,      89.5,      -89.5,      120.0, -120.0, 1e300};

Tensor on(const std::vector<double>& values, DType dtype, Device device) {
  return Tensor::from_data(values, {static_cast<int64_t>(values.size())}).to(dtype).to(device);
}

std::vector<double> cycled(int64_t n, int64_t stride) {
  std::vector<double> v(static_cast<size_t>(n));
  const auto p = static_cast<int64_t>(kSpecial.size());
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = kSpecial[(i / stride) % p];
  return v;
}

// The contract above, element by element; `input` names the element's inputs in a failure.
void check_like_reference(const std::vector<double>& want, const std::vector<double>& got,
                          DType dtype, const std::string& what,
                          const std::function<std::string(size_t)>& input) {
  REQUIRE(want.size() == got.size());
  const double rtol = dtype == DType::F32 ? 2e-6 : 1e-12, atol = dtype == DType::F32 ? 1e-6 : 0;
  for (size_t i = 0; i < want.size(); ++i) {
    bool same;
    if (std::isnan(want[i]))
      same = std::isnan(got[i]);
    else if (std::isinf(want[i]))
      same = got[i] == want[i];
    else
      same = std::isfinite(got[i]) && std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]);
    if (!same)
      FAIL_CHECK(what << " " << std::string(dtype_name(dtype)) << " at " << input(i)
                      << ": the reference gives " << want[i] << ", the backend " << got[i]);
  }
}

std::vector<Device> fast_devices() {
  std::vector<Device> devices;
  for (Device d : test::available_devices())
    if (d != Device::ref()) devices.push_back(d);
  return devices;
}

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

TEST_CASE("non-finite: every unary op gives the reference's NaNs, infinities and values") {
  const UnaryOp ops[] = {
#define MIXLAB_ENTRY(n) UnaryOp::n,
      MIXLAB_UNARY_OPS(MIXLAB_ENTRY)
#undef MIXLAB_ENTRY
  };
  for (Device device : fast_devices())
    for (DType dtype : {DType::F32, DType::F64})
      for (UnaryOp op : ops)
        for (int64_t n : {13, 169}) {
          const double alpha = op == UnaryOp::PowScalar ? 1.7 : -0.37;
          Tensor x_ref = on(cycled(n, 1), dtype, Device::ref());
          Tensor x = on(cycled(n, 1), dtype, device);
          Tensor want = Tensor::empty({n}, dtype, Device::ref());
          Tensor got = Tensor::empty({n}, dtype, device);
          backend_for(Device::ref()).unary(op, x_ref.view(), want.view(), alpha);
          backend_for(device).unary(op, x.view(), got.view(), alpha);
          const std::vector<double> xs = x_ref.to_double_vector();
          check_like_reference(want.to_double_vector(), got.to_double_vector(), dtype,
                               std::string(test::unary_name(op)) + " on " + device.str(),
                               [&](size_t i) { return "x = " + number(xs[i]); });
        }
}

TEST_CASE("non-finite: every binary op gives the reference's NaNs, infinities and values") {
  const BinaryOp ops[] = {
#define MIXLAB_ENTRY(n) BinaryOp::n,
      MIXLAB_BINARY_OPS(MIXLAB_ENTRY)
#undef MIXLAB_ENTRY
  };
  // a cycles fastest and b slowest: the 169 elements are every pair of special values.
  const int64_t n = 169;
  for (Device device : fast_devices())
    for (DType dtype : {DType::F32, DType::F64})
      for (BinaryOp op : ops) {
        Tensor a_ref = on(cycled(n, 1), dtype, Device::ref());
        Tensor b_ref = on(cycled(n, 13), dtype, Device::ref());
        Tensor a = on(cycled(n, 1), dtype, device), b = on(cycled(n, 13), dtype, device);
        Tensor want = Tensor::empty({n}, dtype, Device::ref());
        Tensor got = Tensor::empty({n}, dtype, device);
        backend_for(Device::ref()).binary(op, a_ref.view(), b_ref.view(), want.view());
        backend_for(device).binary(op, a.view(), b.view(), got.view());
        const std::vector<double> as = a_ref.to_double_vector(), bs = b_ref.to_double_vector();
        check_like_reference(
            want.to_double_vector(), got.to_double_vector(), dtype,
            std::string(test::binary_name(op)) + " on " + device.str(),
            [&](size_t i) { return "a = " + number(as[i]) + ", b = " + number(bs[i]); });
      }
}

TEST_CASE("non-finite: where takes a or b by a NaN, infinite or zero condition as the reference") {
  const int64_t n = 169;
  for (Device device : fast_devices())
    for (DType dtype : {DType::F32, DType::F64}) {
      std::vector<double> ones(n, 1.0);
      auto run = [&](Device d) {
        Tensor cond = on(cycled(n, 1), dtype, d), a = on(cycled(n, 13), dtype, d);
        Tensor b = on(ones, dtype, d), out = Tensor::empty({n}, dtype, d);
        backend_for(d).where(cond.view(), a.view(), b.view(), out.view());
        return out.to_double_vector();
      };
      const std::vector<double> conds = cycled(n, 1), as = cycled(n, 13);
      check_like_reference(
          run(Device::ref()), run(device), dtype, "where on " + device.str(),
          [&](size_t i) { return "cond = " + number(conds[i]) + ", a = " + number(as[i]); });
    }
}

TEST_CASE("non-finite: sums, maxima, minima and sum_squares over rows holding one special value") {
  // Row r of [13, 37] holds kSpecial[r] at column (5 r) mod 37 among finite values, and the
  // reductions run along rows (inner = 1) and, on the transpose's layout, along columns.
  const int64_t rows = 13, cols = 37;
  std::vector<double> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[static_cast<size_t>(r * cols + c)] = c == (5 * r) % cols
                                                 ? kSpecial[static_cast<size_t>(r)]
                                                 : std::sin(0.3 * double(r * cols + c));
  for (Device device : fast_devices())
    for (DType dtype : {DType::F32, DType::F64})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
        const char* name = op == ReduceOp::Sum ? "sum" : op == ReduceOp::Max ? "max" : "min";
        // Along rows: outer = rows, n = cols, inner = 1; along columns: outer = 1, n = rows,
        // inner = cols (column c of the same data).
        for (bool along_rows : {true, false}) {
          const int64_t outer = along_rows ? rows : 1, len = along_rows ? cols : rows;
          const int64_t inner = along_rows ? 1 : cols;
          auto run = [&](Device d) {
            Tensor in = on(x, dtype, d), out = Tensor::empty({outer * inner}, dtype, d);
            backend_for(d).reduce(op, in.view(), outer, len, inner, out.view());
            return out.to_double_vector();
          };
          check_like_reference(run(Device::ref()), run(device), dtype,
                               std::string(name) + (along_rows ? " along rows" : " along columns") +
                                   " on " + device.str(),
                               [&](size_t i) {
                                 return along_rows ? "row " + std::to_string(i) + " (holding " +
                                                         number(kSpecial[i]) + ")"
                                                   : "column " + std::to_string(i);
                               });
        }
      }
  for (Device device : fast_devices())
    for (DType dtype : {DType::F32, DType::F64})
      for (size_t k = 0; k < kSpecial.size(); ++k) {
        std::vector<double> v(x.begin(), x.begin() + 169);
        v[100] = kSpecial[k];
        auto run = [&](Device d) {
          Tensor in = on(v, dtype, d), out = Tensor::empty({1}, dtype, d);
          backend_for(d).sum_squares(in.view(), out.view());
          return out.to_double_vector();
        };
        check_like_reference(run(Device::ref()), run(device), dtype,
                             "sum_squares on " + device.str(),
                             [&](size_t) { return "one element " + number(kSpecial[k]); });
      }
}
