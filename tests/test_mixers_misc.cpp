// Hand-checkable values for external attention, FNet, HC-SA, lightweight/dynamic convolution
// and Linformer (mixers.md §7, §8, §10, §11, §12); the shared harness covers the properties.
#include <cmath>
#include <numbers>

#include "nn/module.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

MixerConfig config_for(const std::string& name, int64_t d, int64_t h, bool causal = false,
                       std::map<std::string, std::string> options = {}) {
  MixerConfig c = small_config(name, causal);
  c.dim = d;
  c.heads = h;
  c.options = std::move(options);
  return c;
}

std::vector<double> identity(int64_t n) {
  std::vector<double> out(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) out[i * n + i] = 1.0;
  return out;
}

double gaussian(double z) { return std::exp(-z * z / 2) / std::sqrt(2 * std::numbers::pi); }

}  // namespace

// ---- FNet ----

TEST_CASE("mixer values: fnet equals a direct DFT double sum at each example length") {
  auto m = build64(config_for("fnet", 4, 2));
  CHECK(m->parameter_count() == 0);
  NoGradGuard no_grad;
  const int64_t n = 5, d = 4;
  Tensor x = rand64({2, n, d}, 21, false);
  auto xv = x.to_double_vector();
  // Y[j,c] = Σ_t Σ_u X[t,u] cos(2π(jt/len + cu/d)) for rows j < len, 0 below.
  auto direct = [&](int64_t b, int64_t len) {
    std::vector<double> y(n * d, 0.0);
    for (int64_t j = 0; j < len; ++j)
      for (int64_t c = 0; c < d; ++c)
        for (int64_t t = 0; t < len; ++t)
          for (int64_t u = 0; u < d; ++u)
            y[j * d + c] +=
                xv[(b * n + t) * d + u] *
                std::cos(2 * std::numbers::pi *
                         (static_cast<double>(j * t) / len + static_cast<double>(c * u) / d));
    return y;
  };
  Tensor full = m->forward(x, context_for(x, {}, false));
  check_close(rows_of(full, 0, 0, n), direct(0, n), 1e-12);
  check_close(rows_of(full, 1, 0, n), direct(1, n), 1e-12);

  Tensor var = m->forward(x, context_for(x, {5, 3}, false));
  check_close(rows_of(var, 0, 0, n), direct(0, 5), 1e-12);
  check_close(rows_of(var, 1, 0, n), direct(1, 3), 1e-12);  // rows 3, 4 are 0

  // The same lengths from `valid` alone (no host lengths) give the same result.
  MixerContext only_valid = context_for(x, {5, 3}, false);
  only_valid.lengths.clear();
  check_close(m->forward(x, only_valid).to_double_vector(), var.to_double_vector(), 0.0);
}

TEST_CASE("mixer values: fnet-padded transforms at the padded length like the official code") {
  auto padded = build64(config_for("fnet", 4, 2, false, {{"fnet-padded", "true"}}));
  auto plain = build64(config_for("fnet", 4, 2));
  CHECK_FALSE(padded->capabilities().padding_property);
  CHECK_FALSE(padded->capabilities().exact_length_equivalence);
  CHECK(plain->capabilities().padding_property);
  CHECK(plain->capabilities().exact_length_equivalence);
  NoGradGuard no_grad;
  Tensor x = rand64({2, 5, 4}, 22, false);
  MixerContext ctx = context_for(x, {5, 3}, false);
  Tensor yp = padded->forward(x, ctx), yv = plain->forward(x, ctx);
  // Padded mode ignores the lengths: it equals the unpadded transform of the whole batch.
  Tensor whole = plain->forward(x, context_for(x, {}, false));
  check_close(yp.to_double_vector(), whole.to_double_vector(), 1e-12);
  // The full-length example agrees; the padded one differs at its valid rows.
  check_close(rows_of(yp, 0, 0, 5), rows_of(yv, 0, 0, 5), 1e-12);
  auto a = rows_of(yp, 1, 0, 3), b = rows_of(yv, 1, 0, 3);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  CHECK(diff > 1e-3);
  // And the padded rows are left as computed (not zeroed).
  double tail = 0;
  for (double v : rows_of(yp, 1, 3, 5)) tail = std::max(tail, std::abs(v));
  CHECK(tail > 1e-3);
}

// ---- HC-SA ----

// With W_V = W_O = I and d_h = 1, head k's output channel k is Σ_j w_k[i,j] X[j,k].
TEST_CASE("mixer values: hcsa causal row sums with offset 0 are 0.399 0.641 0.695 then 0.699") {
  auto m = build64(config_for("hcsa", 2, 2, true));
  set_param(*m, "w_v.weight", identity(2));
  set_param(*m, "w_o.weight", identity(2));
  NoGradGuard no_grad;
  const int64_t n = 7;
  Tensor ones = Tensor::ones({1, n, 2}, DType::F64);
  auto y = m->forward(ones, context_for(ones, {}, true)).to_double_vector();
  const double paper[] = {0.399, 0.641, 0.695, 0.699, 0.699, 0.699, 0.699};
  for (int64_t i = 0; i < n; ++i) {
    INFO("row " << i);
    double offset0 = 0, offset_minus1 = 0;  // Σ_{j ≤ i} φ(j − i − o)
    for (int64_t j = 0; j <= i; ++j) {
      offset0 += gaussian(static_cast<double>(j - i));
      offset_minus1 += gaussian(static_cast<double>(j - i + 1));
    }
    CHECK(y[i * 2 + 1] == doctest::Approx(offset0).epsilon(1e-12));
    CHECK(std::abs(y[i * 2 + 1] - paper[i]) < 1e-3);
    CHECK(y[i * 2 + 0] == doctest::Approx(offset_minus1).epsilon(1e-12));
  }
  CHECK(std::abs(y[0] - 0.242) < 1e-3);  // head 0 (offset −1), row 0: φ(1) only
}

TEST_CASE("mixer values: hcsa weights are the offset Gaussians with padding zeroed") {
  auto m = build64(config_for("hcsa", 2, 2));
  set_param(*m, "w_v.weight", identity(2));
  set_param(*m, "w_o.weight", identity(2));
  NoGradGuard no_grad;
  const int64_t n = 6;
  // Example b is the one-hot row at position b, so Y[b, i, k] = w_k[i, b].
  std::vector<double> onehots(n * n * 2, 0.0);
  for (int64_t b = 0; b < n; ++b) onehots[(b * n + b) * 2] = onehots[(b * n + b) * 2 + 1] = 1.0;
  Tensor x = Tensor::from_data(onehots, {n, n, 2});
  auto y = m->forward(x, context_for(x, {}, false)).to_double_vector();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i) {
      INFO("w[" << i << ", " << j << "]");
      CHECK(y[(j * n + i) * 2 + 0] == doctest::Approx(gaussian(j - i + 1.0)).epsilon(1e-12));
      CHECK(y[(j * n + i) * 2 + 1] == doctest::Approx(gaussian(j - i - 1.0)).epsilon(1e-12));
    }
  // Padding: weights to invalid positions are zeroed and the rest are not renormalised.
  Tensor ones = Tensor::ones({1, n, 2}, DType::F64);
  auto yp = m->forward(ones, context_for(ones, {4}, false)).to_double_vector();
  for (int64_t i = 0; i < n; ++i) {
    double s0 = 0, s1 = 0;
    for (int64_t j = 0; j < 4; ++j) s0 += gaussian(j - i + 1.0), s1 += gaussian(j - i - 1.0);
    CHECK(yp[i * 2 + 0] == doctest::Approx(s0).epsilon(1e-12));
    CHECK(yp[i * 2 + 1] == doctest::Approx(s1).epsilon(1e-12));
  }
}

// ---- external attention ----

// A direct loop version of §7 (e = 1) from the mixer's own parameters.
std::vector<double> external_reference(const Mixer& m, const Tensor& x, int64_t heads,
                                       const std::vector<int32_t>& lengths, bool causal) {
  auto xv = x.to_double_vector();
  auto wt = param(m, "w_t.weight").to_double_vector(), bt = param(m, "w_t.bias").to_double_vector();
  auto mk = param(m, "m_k.weight").to_double_vector(), bk = param(m, "m_k.bias").to_double_vector();
  auto mv = param(m, "m_v.weight").to_double_vector(), bv = param(m, "m_v.bias").to_double_vector();
  auto wp = param(m, "w_p.weight").to_double_vector(), bp = param(m, "w_p.bias").to_double_vector();
  int64_t batch = x.size(0), n = x.size(1), d = x.size(2), dh = d / heads,
          s = static_cast<int64_t>(bk.size());
  std::vector<double> y(batch * n * d, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = lengths.empty() ? n : lengths[b];
    std::vector<double> xp(n * d, 0.0), o(n * d, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) {
        xp[i * d + c] = bt[c];
        for (int64_t u = 0; u < d; ++u) xp[i * d + c] += xv[(b * n + i) * d + u] * wt[c * d + u];
      }
    for (int64_t k = 0; k < heads; ++k) {
      std::vector<double> logit(n * s, 0.0), a(n * s, 0.0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t q = 0; q < s; ++q) {
          logit[i * s + q] = bk[q];
          for (int64_t u = 0; u < dh; ++u)
            logit[i * s + q] += xp[i * d + k * dh + u] * mk[q * dh + u];
        }
      for (int64_t i = 0; i < len; ++i) {
        double total = 0;
        for (int64_t q = 0; q < s; ++q) {
          int64_t last = causal ? i : len - 1;  // tokens in the softmax: 0 .. last
          double z = 0;
          for (int64_t t = 0; t <= last; ++t) z += std::exp(logit[t * s + q]);
          a[i * s + q] = std::exp(logit[i * s + q]) / z;
          total += a[i * s + q];
        }
        for (int64_t q = 0; q < s; ++q) a[i * s + q] /= 1e-9 + total;
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t u = 0; u < dh; ++u) {
          double acc = bv[u];
          for (int64_t q = 0; q < s; ++q) acc += a[i * s + q] * mv[u * s + q];
          o[i * d + k * dh + u] = acc;
        }
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) {
        double acc = bp[c];
        for (int64_t u = 0; u < d; ++u) acc += o[i * d + u] * wp[c * d + u];
        y[(b * n + i) * d + c] = acc;
      }
  }
  return y;
}

TEST_CASE("mixer values: external attention against a direct loop computation") {
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "non-causal"));
    auto m = build64(config_for("external", 4, 2, causal, {{"slots", "5"}}));
    NoGradGuard no_grad;
    Tensor x = rand64({2, 5, 4}, 23, false);
    // Scale up the memory logits so the token softmax is far from uniform.
    assign_in_place(param(*m, "m_k.weight"), mul(param(*m, "m_k.weight"), 100.0));
    assign_in_place(param(*m, "w_t.weight"), mul(param(*m, "w_t.weight"), 20.0));
    for (std::vector<int32_t> lengths : {std::vector<int32_t>{}, std::vector<int32_t>{5, 3}}) {
      Tensor y = m->forward(x, context_for(x, lengths, causal));
      auto ref = external_reference(*m, x, 2, lengths, causal);
      for (int b = 0; b < 2; ++b) {
        int64_t len = lengths.empty() ? 5 : lengths[b];
        std::vector<double> r(ref.begin() + b * 5 * 4, ref.begin() + (b * 5 + len) * 4);
        check_close(rows_of(y, b, 0, len), r, 1e-10);
      }
    }
  }
}

// With M_v's weight all ones (bias 0) and W_p = I (bias 0), each output channel is Σ_s A[i,s].
TEST_CASE("mixer values: external attention rows sum to 1 over the memory slots") {
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "non-causal"));
    auto m = build64(config_for("external", 4, 2, causal));
    set_param(*m, "m_v.weight", std::vector<double>(2 * 64, 1.0));
    set_param(*m, "w_p.weight", identity(4));
    NoGradGuard no_grad;
    Tensor x = rand64({2, 6, 4}, 24, false);
    auto y = m->forward(x, context_for(x, {6, 4}, causal)).to_double_vector();
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 6; ++i) {
        bool valid = b == 0 || i < 4;
        for (int c = 0; c < 4; ++c) {
          INFO("b " << b << " i " << i << " c " << c);
          double v = y[(b * 6 + i) * 4 + c];
          CHECK(std::abs(v - (valid ? 1.0 : 0.0)) < 1e-8);  // padded rows: A = 0
        }
      }
    // A length-0 example: no NaN, A = 0 everywhere.
    Tensor x1 = rand64({1, 3, 4}, 25, false);
    for (double v : m->forward(x1, context_for(x1, {0}, causal)).to_double_vector())
      CHECK(v == 0.0);
  }
}

// Every property of expansion 2 is the shared mixer tests' (its test option); this is the
// count written out: 2e·d² + (e+1)d + 2d_h·S + S + d_h.
TEST_CASE("mixer values: external attention with expansion 2 counts its parameters") {
  MixerConfig c = config_for("external", 8, 2, true, {{"expansion", "2"}, {"slots", "7"}});
  CHECK(make_mixer(c)->parameter_count() == 2 * 2 * 64 + 3 * 8 + 2 * 4 * 7 + 7 + 4);
}

// ---- lightweight and dynamic convolution ----

// d = 2, h = 2 (one channel per kernel), K = 3, G = X (W_g = [I; 0], b_g = [0, 0, 40, 40] so the
// gate σ(40) is 1 in double), W_o = I: Y is the convolution D itself.
std::shared_ptr<Mixer> hand_conv(const std::string& name, bool causal) {
  auto m = build64(config_for(name, 2, 2, causal, {{"kernel", "3"}}));
  set_param(*m, "w_g.weight", {1, 0, 0, 1, 0, 0, 0, 0});
  set_param(*m, "w_g.bias", {0, 0, 40, 40});
  set_param(*m, "w_o.weight", identity(2));
  if (name == "lightconv")  // softmax(log p) = p: taps (0.2, 0.3, 0.5) and (0.1, 0.6, 0.3)
    set_param(
        *m, "w",
        {std::log(0.2), std::log(0.3), std::log(0.5), std::log(0.1), std::log(0.6), std::log(0.3)});
  else
    set_param(*m, "w_dyn.weight", std::vector<double>(6 * 2, 0.0));  // uniform taps 1/3
  return m;
}

TEST_CASE("mixer values: lightconv with a hand-set kernel against a hand computation") {
  NoGradGuard no_grad;
  Tensor x = Tensor::from_data(std::vector<double>{1, 10, 2, 20, 3, 30, 4, 40}, {1, 4, 2});
  // Centred (P = 1): D[t] = 0.2 G[t−1] + 0.3 G[t] + 0.5 G[t+1] (channel 0), 0.1/0.6/0.3 (channel
  // 1).
  auto centred = hand_conv("lightconv", false);
  check_close(centred->forward(x, context_for(x, {}, false)).to_double_vector(),
              {1.3, 12, 2.3, 22, 3.3, 32, 1.8, 27}, 1e-12);
  // Length 3: G[3] is zeroed, so row 2 loses its right neighbour.
  check_close(rows_of(centred->forward(x, context_for(x, {3}, false)), 0, 0, 3),
              {1.3, 12, 2.3, 22, 1.3, 20}, 1e-12);
  // Causal (P = 2): D[t] = 0.2 G[t−2] + 0.3 G[t−1] + 0.5 G[t].
  auto causal = hand_conv("lightconv", true);
  check_close(causal->forward(x, context_for(x, {}, true)).to_double_vector(),
              {0.5, 3, 1.3, 12, 2.3, 22, 3.3, 32}, 1e-12);
}

TEST_CASE("mixer values: dynconv with zero kernel weights averages its window") {
  NoGradGuard no_grad;
  Tensor x = Tensor::from_data(std::vector<double>{1, 10, 2, 20, 3, 30, 4, 40}, {1, 4, 2});
  auto centred = hand_conv("dynconv", false);
  check_close(centred->forward(x, context_for(x, {}, false)).to_double_vector(),
              {1.0, 10, 2, 20, 3, 30, 7.0 / 3, 70.0 / 3}, 1e-12);
  auto causal = hand_conv("dynconv", true);
  check_close(causal->forward(x, context_for(x, {}, true)).to_double_vector(),
              {1.0 / 3, 10.0 / 3, 1, 10, 2, 20, 3, 30}, 1e-12);
}

TEST_CASE("mixer values: convolution kernel width must be odd") {
  for (const char* name : {"lightconv", "dynconv"}) {
    INFO(name);
    // The registry refuses them before building, naming the option and what is allowed.
    CHECK_THROWS_WITH_AS(make_mixer(config_for(name, 8, 2, false, {{"kernel", "6"}})),
                         doctest::Contains("kernel=6 is not allowed: kernel width K must be a "
                                           "positive odd number"),
                         MixerSpecError);
    for (const char* k : {"0", "-3"})
      CHECK_THROWS_WITH_AS(make_mixer(config_for(name, 8, 2, false, {{"kernel", k}})),
                           doctest::Contains("is out of range; allowed: an integer in [1, 255]"),
                           MixerSpecError);
    // K = 1 works and decodes step by step (K = 3 and 5 are the shared tests' options).
    MixerConfig c = config_for(name, 8, 2, true, {{"kernel", "1"}});
    auto m = build64(c);
    CHECK(m->parameter_count() == MixerRegistry::instance().find(name).expected_parameters(c));
    check_decoding_equals_forward(*m, rand64({2, 5, 8}, 27, false));
  }
}

// ---- Linformer ----

TEST_CASE("mixer values: linformer projected length and shapes of E and F") {
  MixerConfig c = config_for("linformer", 8, 2);
  c.max_len = 10;
  auto m = build64(c);
  CHECK(param(*m, "E").shape() == Shape{2, 10});  // p = max(1, ⌊10/4⌋) = 2
  CHECK(param(*m, "F").shape() == Shape{2, 10});
  c.max_len = 3;
  CHECK(param(*build64(c), "E").shape() == Shape{1, 3});  // p = max(1, 0) = 1
  c.options = {{"proj-len", "5"}};
  auto m5 = build64(c);
  CHECK(param(*m5, "E").shape() == Shape{5, 3});
  CHECK(m5->parameter_count() == 4 * 64 + 4 * 8 + 2 * 5 * 3);
  // With E = F = [1 1 1 0 ...] (one compressed position: the sum of the tokens), every query
  // sees one key: A = 1 and Y = (Σ_valid X) W_V W_O + b_V W_O + b_O.
  c.max_len = 6;
  c.options = {{"proj-len", "1"}};
  auto m1 = build64(c);
  set_param(*m1, "E", std::vector<double>(6, 1.0));
  set_param(*m1, "F", std::vector<double>(6, 1.0));
  set_param(*m1, "w_v.weight", identity(8));
  set_param(*m1, "w_o.weight", identity(8));
  NoGradGuard no_grad;
  Tensor x = rand64({1, 5, 8}, 28, false);
  auto y = m1->forward(x, context_for(x, {3}, false)).to_double_vector();
  auto xv = x.to_double_vector();
  for (int i = 0; i < 5; ++i)
    for (int c2 = 0; c2 < 8; ++c2)
      CHECK(y[i * 8 + c2] ==
            doctest::Approx(xv[0 * 8 + c2] + xv[1 * 8 + c2] + xv[2 * 8 + c2]).epsilon(1e-12));
}
