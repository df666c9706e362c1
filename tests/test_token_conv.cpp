// The depthwise token convolution op (autograd/ops/token_conv.cpp) against the unfused path it
// replaced in lightconv/dynconv (zero padding, K stacked shifted windows, product with the
// broadcast taps, sum over K) in float32, its determinism for a given thread count, and its
// refusals. Float64 finite differences for both inputs and the comparison with a plain C++
// formula are rows of the op harness (tests/op_cases.cpp, kernels token_conv and
// token_conv_backward).
#include <doctest/doctest.h>

#include "core/parallel.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// The formulation lightconv.cpp used before the op: pad, stack the K windows, multiply, sum.
Tensor unfused(const Tensor& g, const Tensor& taps, int64_t left) {
  int64_t b = g.size(0), n = g.size(1), d = g.size(2), h = taps.size(2), k = taps.size(3);
  int64_t right = k - 1 - left;
  std::vector<Tensor> parts;
  if (left > 0) parts.push_back(Tensor::zeros({b, left, d}, g.dtype()));
  parts.push_back(g);
  if (right > 0) parts.push_back(Tensor::zeros({b, right, d}, g.dtype()));
  Tensor padded = concat(parts, 1);
  std::vector<Tensor> windows;
  for (int64_t m = 0; m < k; ++m) windows.push_back(narrow(padded, 1, m, n));
  Tensor per_head = reshape(stack(windows, 2), {b, n, k, h, d / h});
  Tensor w = unsqueeze(transpose(taps, 2, 3), -1);  // [Bt, Nt, K, H, 1]
  return reshape(sum(mul(per_head, w), {2}), {b, n, d});
}

struct Result {
  std::vector<double> out, dg, dtaps;
};

// out and the gradients of sum(out ∘ weights) for fixed weights.
Result run_token_conv(bool fused, const Shape& gs, const Shape& ts, int64_t left) {
  Tensor g = rand32(gs, 11), taps = rand32(ts, 12), weights = rand32(gs, 13);
  g.set_requires_grad(true);
  taps.set_requires_grad(true);
  Tensor out = fused ? token_conv(g, taps, left) : unfused(g, taps, left);
  sum(mul(out, weights)).backward();
  return {out.to_double_vector(), g.grad().to_double_vector(), taps.grad().to_double_vector()};
}

}  // namespace

TEST_CASE("token_conv: agrees with the padded, stacked windows it replaced, values and grads") {
  for (bool per_position : {false, true})
    for (int64_t left : {0, 3, 6}) {
      INFO((per_position ? "per-position" : "shared") << " taps, left " << left);
      Shape ts = per_position ? Shape{3, 20, 4, 7} : Shape{1, 1, 4, 7};
      Result fused = run_token_conv(true, {3, 20, 32}, ts, left),
             reference = run_token_conv(false, {3, 20, 32}, ts, left);
      check_close(fused.out, reference.out, 1e-5);
      check_close(fused.dg, reference.dg, 1e-5);
      check_close(fused.dtaps, reference.dtaps, 1e-5);
    }
}

TEST_CASE("token_conv: repeats bit for bit for a given thread count") {
  int saved = num_threads();
  for (int threads : {1, 2})
    for (bool per_position : {false, true}) {
      INFO(threads << " threads, " << (per_position ? "per-position" : "shared") << " taps");
      set_num_threads(threads);
      Shape ts = per_position ? Shape{8, 49, 4, 7} : Shape{1, 1, 4, 7};
      Result first = run_token_conv(true, {8, 49, 64}, ts, 3),
             again = run_token_conv(true, {8, 49, 64}, ts, 3);
      CHECK(first.out == again.out);
      CHECK(first.dg == again.dg);
      CHECK(first.dtaps == again.dtaps);
    }
  set_num_threads(saved);
}

TEST_CASE("token_conv: wrong shapes and paddings name the op and the shapes") {
  Tensor g = rand32({2, 5, 6}, 1);
  CHECK_THROWS_WITH_AS(token_conv(g, rand32({1, 1, 4, 3}, 2), 1),
                       doctest::Contains("token_conv: taps must be [B or 1, N or 1, H, K] with H > "
                                         "0 dividing d and K > 0 for g [B, N, d]: g [2,5,6], taps "
                                         "[1,1,4,3]"),
                       Error);
  CHECK_THROWS_WITH_AS(token_conv(g, rand32({1, 3, 2, 3}, 2), 1),
                       doctest::Contains("g [2,5,6], taps [1,3,2,3]"), Error);
  CHECK_THROWS_WITH_AS(token_conv(reshape(g, {10, 6}), rand32({1, 1, 2, 3}, 2), 1),
                       doctest::Contains("token_conv: needs g [B, N, d] and taps"), Error);
  CHECK_THROWS_WITH_AS(token_conv(g, rand32({1, 1, 2, 3}, 2), 3),
                       doctest::Contains("token_conv: left padding 3 must be in [0, K) for K = 3"),
                       Error);
  CHECK_THROWS_WITH_AS(token_conv(g, cast(rand32({1, 1, 2, 3}, 2), DType::F64), 1),
                       doctest::Contains("token_conv: dtypes differ"), Error);
}
