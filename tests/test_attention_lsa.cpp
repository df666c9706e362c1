// Attention's Locality Self-Attention (mixers.md §2, `--mixer-opt lsa=true`): the equation with
// its learned temperature and masked own key, written out by hand, and its refusals. Every
// property of plain attention (float64 gradients, padding, the parameter count) is the shared
// mixer tests' (tests/test_mixers.cpp), which run attention with lsa=true as a test option.
#include <cmath>

#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// d = 4, h = 2 (d_h = 2), W_V = W_O = I and every bias 0, so Y = concat_k(A_k X_k).
MixerConfig lsa_config() {
  MixerConfig c = small_config("attention");
  c.dim = 4;
  c.options["lsa"] = "true";
  return c;
}

std::vector<double> identity4() {
  std::vector<double> eye(16, 0.0);
  for (int i = 0; i < 4; ++i) eye[i * 5] = 1.0;
  return eye;
}

// The equation in plain loops: per head k, s_ij = Q_i·K_j / τ over keys j ≠ i of the first
// `length` positions, a_i = softmax(s_i), Y_i = Σ_j a_ij X_j (V = X).
std::vector<double> lsa_by_hand(const std::vector<double>& x, const std::vector<double>& wq,
                                const std::vector<double>& wk, double tau, int64_t n,
                                int64_t length) {
  auto project = [&](const std::vector<double>& w, int64_t i, int64_t o) {
    double s = 0;
    for (int64_t c = 0; c < 4; ++c) s += x[i * 4 + c] * w[o * 4 + c];  // Linear: x Wᵀ
    return s;
  };
  std::vector<double> y(static_cast<size_t>(n * 4), 0.0);
  for (int64_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < length; ++i) {
      std::vector<double> score(static_cast<size_t>(n), -INFINITY);
      double top = -INFINITY;
      for (int64_t j = 0; j < length; ++j) {
        if (j == i) continue;
        double s = 0;
        for (int64_t c = 2 * k; c < 2 * k + 2; ++c) s += project(wq, i, c) * project(wk, j, c);
        score[j] = s / tau;
        top = std::max(top, score[j]);
      }
      double total = 0;
      for (int64_t j = 0; j < length; ++j)
        if (j != i) total += std::exp(score[j] - top);
      for (int64_t j = 0; j < length; ++j)
        if (j != i)
          for (int64_t c = 2 * k; c < 2 * k + 2; ++c)
            y[i * 4 + c] += std::exp(score[j] - top) / total * x[j * 4 + c];
    }
  return y;
}

}  // namespace

TEST_CASE("attention lsa: softmax(Q Kᵀ/τ) over the other keys, fused and by the equation") {
  auto m = build64(lsa_config());
  // τ starts at √d_h (held in float32 until the model moves to float64): plain attention's scores.
  check_close(param(*m, "temperature").to_double_vector(), {std::sqrt(2.0)}, 1e-7);
  set_param(*m, "w_v.weight", identity4());
  set_param(*m, "w_o.weight", identity4());
  const double tau = 0.37;  // far from √2, so a forgotten temperature shows
  set_param(*m, "temperature", {tau});
  auto wq = param(*m, "w_q.weight").to_double_vector();
  auto wk = param(*m, "w_k.weight").to_double_vector();
  Tensor x = rand64({2, 5, 4}, 3, false);
  std::vector<int32_t> lengths{5, 3};
  for (bool capture : {false, true}) {  // a recorder runs the equation's path
    const std::string path = capture ? "the equation's path" : "the fused core";
    INFO(path);
    NoGradGuard no_grad;
    std::optional<MixingRecorder> recorder;
    if (capture) recorder.emplace(*m);
    Tensor y = m->forward(x, context_for(x, lengths, false));
    for (int64_t b = 0; b < 2; ++b) {
      auto xb = rows_of(x, b, 0, 5);
      auto want = lsa_by_hand(xb, wq, wk, tau, 5, lengths[b]);
      want.resize(static_cast<size_t>(lengths[b] * 4));
      check_close(rows_of(y, b, 0, lengths[b]), want, 1e-12);
    }
    if (capture)  // every query's weight on its own key is 0
      for (const auto& mm : recorder->matrices())
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = 0; i < mm.n_rows(); ++i) CHECK(mm.at(b, h, i, i) == 0.0);
  }
}

TEST_CASE("attention lsa: a one-token sequence has no other key and gives b_O") {
  auto m = build64(lsa_config());
  set_param(*m, "w_o.bias", {0.1, 0.2, 0.3, 0.4});
  NoGradGuard no_grad;
  Tensor x = rand64({2, 3, 4}, 5, false);
  Tensor y = m->forward(x, context_for(x, {3, 1}, false));
  check_close(rows_of(y, 1, 0, 1), {0.1, 0.2, 0.3, 0.4}, 1e-12);
}

TEST_CASE("attention lsa: one parameter more, and refused for cross and causal use by name") {
  MixerConfig c = lsa_config();
  CHECK(make_mixer(c)->parameter_count() == 4 * 16 + 4 * 4 + 1);
  MixerConfig cross = c;
  cross.cross = true;
  CHECK_THROWS_WITH_AS(make_mixer(cross),
                       doctest::Contains("mixer 'attention' cannot be a cross-mixer "
                                         "(keys and values from memory): lsa masks"),
                       MixerSpecError);
  MixerConfig causal = c;
  causal.causal = true;
  CHECK_THROWS_WITH_AS(make_mixer(causal),
                       doctest::Contains("mixer 'attention' cannot be causal: with lsa"),
                       MixerSpecError);
  causal.options["lsa"] = "false";  // off: attention is causal as ever
  CHECK_NOTHROW(make_mixer(causal));
}
