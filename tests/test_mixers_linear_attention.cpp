// linear-attention (mixers.md §15) against a naive float64 reference written straight from the
// equation: for every query i, O[i] = Σ_j (φ(q_i)·φ(k_j)) v_j / (Σ_j φ(q_i)·φ(k_j) + ε) over the
// keys j it may see (valid, and j ≤ i when causal). The shared harness (tests/test_mixers.cpp)
// covers gradients, padding, causality, length equivalence and decoding.
#include <cmath>

#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

constexpr double kEpsilon = 1e-6;

double phi(double x) { return x > 0 ? x + 1 : std::exp(x); }

// y = x Wᵀ + b for one row (W stored [out, in], PyTorch's layout).
std::vector<double> linear_row(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b) {
  std::vector<double> y(b);
  for (size_t o = 0; o < b.size(); ++o)
    for (size_t i = 0; i < x.size(); ++i) y[o] += w[o * x.size() + i] * x[i];
  return y;
}

// The reference output [B, N, d] as a flat vector.
std::vector<double> naive_linear_attention(const Mixer& m, const Tensor& x,
                                           const std::vector<int32_t>& lengths, bool causal) {
  const int64_t batch = x.size(0), n = x.size(1), d = x.size(2), h = m.config().heads, dh = d / h;
  auto w = [&](const std::string& name) { return param(m, name).to_double_vector(); };
  auto xs = x.to_double_vector();
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t valid = lengths.empty() ? n : lengths[b];
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> row(xs.begin() + (b * n + t) * d, xs.begin() + (b * n + t + 1) * d);
      q[t] = linear_row(row, w("w_q.weight"), w("w_q.bias"));
      k[t] = linear_row(row, w("w_k.weight"), w("w_k.bias"));
      v[t] = linear_row(row, w("w_v.weight"), w("w_v.bias"));
    }
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> o(d, 0.0);
      for (int64_t head = 0; head < h; ++head) {
        std::vector<double> numerator(dh, 0.0);
        double denominator = kEpsilon;
        for (int64_t j = 0; j < n; ++j) {
          if (j >= valid || (causal && j > i)) continue;
          double similarity = 0;
          for (int64_t c = head * dh; c < (head + 1) * dh; ++c)
            similarity += phi(q[i][c]) * phi(k[j][c]);
          for (int64_t c = 0; c < dh; ++c) numerator[c] += similarity * v[j][head * dh + c];
          denominator += similarity;
        }
        for (int64_t c = 0; c < dh; ++c) o[head * dh + c] = numerator[c] / denominator;
      }
      auto y = linear_row(o, w("w_o.weight"), w("w_o.bias"));
      out.insert(out.end(), y.begin(), y.end());
    }
  }
  return out;
}

// The mixer with every bias set to non-zero values, so the reference checks them too.
std::shared_ptr<Mixer> with_random_biases(bool causal) {
  MixerConfig c = small_config("linear-attention", causal);
  auto m = build64(c);
  uint64_t seed = 40;
  for (const char* name : {"w_q.bias", "w_k.bias", "w_v.bias", "w_o.bias"})
    set_param(*m, name, rand64({c.dim}, seed++, false).to_double_vector());
  return m;
}

}  // namespace

TEST_CASE("linear-attention: values equal the equation computed naively in float64") {
  for (bool causal : {false, true}) {
    for (std::vector<int32_t> lengths : {std::vector<int32_t>{}, std::vector<int32_t>{5, 3}}) {
      INFO((causal ? "causal" : "non-causal") << (lengths.empty() ? "" : " padded"));
      auto m = with_random_biases(causal);
      NoGradGuard no_grad;
      Tensor x = mul(rand64({2, 5, 8}, 31, false), 2.0);  // both branches of φ are reached
      Tensor y = m->forward(x, context_for(x, lengths, causal));
      auto expected = naive_linear_attention(*m, x, lengths, causal);
      auto got = y.to_double_vector();
      // Padded query rows are not specified; compare the valid ones.
      for (int64_t b = 0; b < 2; ++b) {
        int64_t valid = lengths.empty() ? 5 : lengths[b];
        std::vector<double> e(expected.begin() + b * 40, expected.begin() + b * 40 + valid * 8);
        check_close(rows_of(y, b, 0, valid), e, 1e-12);
      }
      CHECK(got.size() == expected.size());
    }
  }
}

TEST_CASE("linear-attention: a sequence with no valid key gives the output bias") {
  auto m = with_random_biases(false);
  NoGradGuard no_grad;
  Tensor x = rand64({2, 4, 8}, 32, false);
  Tensor y = m->forward(x, context_for(x, {0, 4}, false));
  auto bias = param(*m, "w_o.bias").to_double_vector();
  for (int64_t i = 0; i < 4; ++i) check_close(rows_of(y, 0, i, i + 1), bias, 1e-9);
}

TEST_CASE("linear-attention: decoding state stays the same size at every position") {
  // The RNN view: S and z do not grow with the prefix, unlike attention's K/V cache.
  MixerConfig c = small_config("linear-attention", true);
  auto m = build64(c);
  NoGradGuard no_grad;
  Tensor x = rand64({1, 6, 8}, 33, false);
  auto cache = m->new_cache();
  MixerContext ctx = context_for(x, {}, true);
  for (int64_t t = 0; t < 6; ++t) {
    m->step(contiguous(narrow(x, 1, t, 1)), *cache, ctx);
    int64_t held = 0;
    for (Tensor* tensor : cache->batch_tensors()) held += tensor->numel();
    CHECK(held == c.heads * (4 * 4 + 4));  // h · (d_h² + d_h), d_h = 4
  }
}
