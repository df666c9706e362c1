// The selective scan (autograd/ops/selective_scan.cpp, backends/kernels.def) against the plain
// loops of backends/reference/selective_scan.h, forward and backward, on the CPU backend; its
// float64 finite-difference gradients for all six inputs; and its numbers repeat at any thread
// count. (The op harness, tests/op_cases.cpp, compares every other backend with the CPU.)
#include <doctest/doctest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "backends/reference/selective_scan.h"
#include "core/parallel.h"
#include "core/random.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// u, Δ > 0, A < 0, B, C, D for the given sizes, as mamba makes them.
std::vector<Tensor> scan_inputs(reference::ScanDims s, DType dtype, uint64_t seed) {
  Generator gen(seed);
  const Shape rows{s.batch, s.tokens, s.channels}, states{s.batch, s.tokens, s.state};
  std::vector<Tensor> x{Tensor::uniform(rows, -1, 1, gen, dtype),
                        Tensor::uniform(rows, 0.05, 0.8, gen, dtype),
                        Tensor::uniform({s.channels, s.state}, -1.5, -0.1, gen, dtype),
                        Tensor::uniform(states, -1, 1, gen, dtype),
                        Tensor::uniform(states, -1, 1, gen, dtype),
                        Tensor::uniform({s.channels}, -1, 1, gen, dtype)};
  for (auto& t : x) t.set_requires_grad(true);
  return x;
}

struct ScanResult {
  std::vector<std::vector<double>> values;  // y, then du, dΔ, dA, dB, dC, dD
};

// The op's output and the gradients of Σ y ⊙ w.
ScanResult run_op(const std::vector<Tensor>& x, const Tensor& w) {
  for (auto& t : x) t.zero_grad();
  Tensor y = selective_scan(x[0], x[1], x[2], x[3], x[4], x[5]);
  sum(mul(y, w)).backward();
  ScanResult r;
  r.values.push_back(y.to_double_vector());
  for (auto& t : x) r.values.push_back(t.grad().to_double_vector());
  return r;
}

// The same from the reference loops, in T.
template <typename T>
ScanResult run_reference(const std::vector<Tensor>& x, const Tensor& w, reference::ScanDims s) {
  std::vector<std::vector<T>> in;
  for (const auto& t : x) {
    auto v = t.to_double_vector();
    in.emplace_back(v.begin(), v.end());
  }
  auto wv = w.to_double_vector();
  std::vector<T> dy(wv.begin(), wv.end());
  std::vector<std::vector<T>> out{in[0], in[0], in[1], in[2], in[3], in[4], in[5]};
  reference::selective_scan<T>(in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(),
                               in[5].data(), out[0].data(), s);
  reference::selective_scan_backward<T>(
      in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(), in[5].data(), dy.data(),
      out[1].data(), out[2].data(), out[3].data(), out[4].data(), out[5].data(), out[6].data(), s);
  ScanResult r;
  for (auto& v : out) r.values.emplace_back(v.begin(), v.end());
  return r;
}

const char* kWhat[] = {"y", "du", "ddelta", "dA", "dB", "dC", "dD"};

}  // namespace

TEST_CASE("selective_scan: the CPU kernel equals the reference loops, forward and backward") {
  // Channels past one task's group of 32 (so dB and dC add partials), several items (dA, dD).
  for (reference::ScanDims s : {reference::ScanDims{1, 1, 1, 1}, reference::ScanDims{2, 7, 5, 3},
                                reference::ScanDims{3, 20, 70, 16}}) {
    for (DType dtype : {DType::F64, DType::F32}) {
      INFO("dims " << s.batch << "x" << s.tokens << "x" << s.channels << " state " << s.state << " "
                   << dtype_name(dtype));
      auto x = scan_inputs(s, dtype, 42);
      Generator gen(43);
      Tensor w = Tensor::uniform({s.batch, s.tokens, s.channels}, -1, 1, gen, dtype);
      ScanResult got = run_op(x, w);
      ScanResult want =
          dtype == DType::F64 ? run_reference<double>(x, w, s) : run_reference<float>(x, w, s);
      const double tol = dtype == DType::F64 ? 1e-12 : 2e-5;
      for (size_t i = 0; i < got.values.size(); ++i) {
        INFO(kWhat[i]);
        check_close(got.values[i], want.values[i], tol);
      }
    }
  }
}

TEST_CASE("selective_scan: float64 finite-difference gradients of u, Δ, A, B, C and D") {
  for (reference::ScanDims s :
       {reference::ScanDims{2, 6, 3, 4}, reference::ScanDims{1, 3, 35, 2}}) {
    auto x = scan_inputs(s, DType::F64, 7);
    CHECK_GRADS(
        [](const std::vector<Tensor>& in) {
          return selective_scan(in[0], in[1], in[2], in[3], in[4], in[5]);
        },
        x);
  }
}

TEST_CASE("selective_scan: the same numbers at one thread and at four") {
  reference::ScanDims s{5, 17, 100, 8};
  auto x = scan_inputs(s, DType::F32, 9);
  Generator gen(10);
  Tensor w = Tensor::uniform({s.batch, s.tokens, s.channels}, -1, 1, gen, DType::F32);
  const int before = num_threads();
  set_num_threads(1);
  ScanResult one = run_op(x, w);
  set_num_threads(4);
  ScanResult four = run_op(x, w);
  set_num_threads(before);
  for (size_t i = 0; i < one.values.size(); ++i) {
    INFO(kWhat[i]);
    CHECK(one.values[i] == four.values[i]);
  }
}

TEST_CASE("selective_scan: wrong shapes name the op and every shape") {
  reference::ScanDims s{2, 4, 3, 5};
  auto x = scan_inputs(s, DType::F64, 1);
  CHECK_THROWS_WITH(selective_scan(x[0], x[1], x[2], x[3], x[4], narrow(x[5], 0, 0, 2)),
                    doctest::Contains("selective_scan: needs u and delta"));
  CHECK_THROWS_WITH(selective_scan(x[0], x[1], transpose(x[2], 0, 1), x[3], x[4], x[5]),
                    doctest::Contains("A [5,3], B [2,4,5]"));
}
