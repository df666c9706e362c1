// The mixing-matrix capture (nn/mixing_capture.h): every registered mixer hands over its mixing
// matrix, one per layer and head, and the rows obey the mixer's equations.
#include <cmath>
#include <map>
#include <numbers>

#include "nn/mixing_capture.h"
#include "nn/models.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

constexpr int64_t kN = 6;  // tokens (≤ ℓ = 8 of small_config)

std::vector<MixingMatrix> capture_one(Mixer& m, const Tensor& x, bool causal) {
  MixingRecorder recorder(m);
  NoGradGuard no_grad;
  m.forward(x, context_for(x, {}, causal));
  return recorder.matrices();
}

double row_sum(const MixingMatrix& m, int64_t b, int64_t h, int64_t i) {
  double s = 0.0;
  for (int64_t j = 0; j < m.n_cols(); ++j) s += m.at(b, h, i, j);
  return s;
}

// hcsa.cpp: Σ_j exp(−(j − i − o_k)²/2)/√(2π) over keys j < N (j ≤ i when causal), offsets
// (−1, +1, …) or, causal, (−1, 0, …).
double hcsa_row_sum(int64_t i, int64_t head, int64_t n, bool causal) {
  double o = head % 2 == 0 ? -1.0 : (causal ? 0.0 : 1.0), s = 0.0;
  for (int64_t j = 0; j < n; ++j)
    if (!causal || j <= i)
      s += std::exp(-0.5 * (j - i - o) * (j - i - o)) / std::sqrt(2 * std::numbers::pi);
  return s;
}

void check_rows(const MixingMatrix& m, bool causal, int64_t kernel) {
  INFO(m.mixer << " / " << m.what);
  for (double v : m.values) REQUIRE(std::isfinite(v));
  for (int64_t b = 0; b < m.batch(); ++b)
    for (int64_t h = 0; h < m.heads(); ++h)
      for (int64_t i = 0; i < m.n_rows(); ++i) {
        double s = row_sum(m, b, h, i);
        INFO("head " << h << " row " << i << " sums to " << s);
        switch (m.rule) {
          case RowRule::SumToOne:
            CHECK(std::abs(s - 1.0) < 1e-9);
            break;
          case RowRule::Gaussian:
            CHECK(std::abs(s - hcsa_row_sum(i, h, m.n_cols(), causal)) < 1e-9);
            break;
          case RowRule::Band: {
            // Taps inside a window that lies wholly in the sequence sum to 1; nothing outside
            // the band [i − P, i + K − 1 − P].
            int64_t left = causal ? kernel - 1 : kernel / 2;
            bool inside = i - left >= 0 && i - left + kernel - 1 < m.n_cols();
            if (inside) CHECK(std::abs(s - 1.0) < 1e-9);
            CHECK(s <= 1.0 + 1e-9);
            for (int64_t j = 0; j < m.n_cols(); ++j)
              if (j < i - left || j > i - left + kernel - 1) CHECK(m.at(b, h, i, j) == 0.0);
            break;
          }
          case RowRule::Dft: {
            bool cosine = m.what.find("cos") != std::string::npos;
            double expected = cosine && i == 0 ? static_cast<double>(m.n_cols()) : 0.0;
            CHECK(std::abs(s - expected) < 1e-9);
            break;
          }
          case RowRule::Free:
            break;
        }
      }
}

// Finite differences of Y[i, c] with respect to X[j, c], averaged over the channels c.
std::vector<double> channel_mean_jacobian(Mixer& m, const Tensor& x) {
  NoGradGuard no_grad;
  int64_t n = x.size(1), d = x.size(2);
  std::vector<double> base = x.to_double_vector(), out(static_cast<size_t>(n * n), 0.0);
  const double eps = 1e-5;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < d; ++c) {
      std::vector<double> plus = base, minus = base;
      plus[j * d + c] += eps;
      minus[j * d + c] -= eps;
      auto yp = m.forward(Tensor::from_data(plus, x.shape()), MixerContext{}).to_double_vector();
      auto ym = m.forward(Tensor::from_data(minus, x.shape()), MixerContext{}).to_double_vector();
      for (int64_t i = 0; i < n; ++i)
        out[i * n + j] += (yp[i * d + c] - ym[i * d + c]) / (2 * eps) / static_cast<double>(d);
    }
  return out;
}

}  // namespace

TEST_CASE("mixing capture: off by default, one scope at a time, nested scopes restore") {
  auto m = build64(small_config("attention"));
  Tensor x = rand64({1, kN, 8}, 3, false);
  CHECK_FALSE(mixing_capture_active());
  {
    NoGradGuard no_grad;
    m->forward(x, MixerContext{});  // no recorder: nothing to see, nothing fails
  }
  {
    MixingRecorder outer(*m);
    CHECK(mixing_capture_active());
    {
      MixingRecorder inner(*m);
      capture_one(*m, x, false);
      CHECK(inner.matrices().empty());  // capture_one opened its own, innermost scope
    }
    CHECK(outer.matrices().empty());
    CHECK(mixing_capture_active());
  }
  CHECK_FALSE(mixing_capture_active());
}

TEST_CASE("mixing capture: every mixer gives [B, H, N, N]-style matrices whose rows obey it") {
  for (const auto& mc : all_test_cases()) {
    const std::string& name = mc.name;
    // A convolution's band is its kernel width: the option's, else the default 7.
    int64_t kernel = mc.options.count("kernel") ? std::stoll(mc.options.at("kernel")) : 7;
    for (bool causal : {false, true}) {
      if (causal && !case_capabilities(mc).causal) continue;
      const std::string what = mc.label + (causal ? " causal" : "");
      INFO(what);
      auto m = build_case(mc, causal);
      Tensor x = rand64({2, kN, 8}, 7, false);
      auto matrices = capture_one(*m, x, causal);
      REQUIRE(!matrices.empty());
      for (const auto& mm : matrices) {
        INFO(mm.what);
        CHECK(mm.mixer == name);
        CHECK(mm.module == "mixer");
        REQUIRE(mm.shape.size() == 4);
        CHECK((mm.batch() == 1 || mm.batch() == 2));
        if (mm.rows == "query") CHECK(mm.n_rows() == kN);
        check_rows(mm, causal, kernel);
      }
      // Mixers with heads show one matrix per head for their main matrix.
      const auto& first = matrices.front();
      bool per_head = name == "attention" || name.rfind("synth-", 0) == 0 || name == "hcsa" ||
                      name == "lightconv" || name == "dynconv" || name == "linformer" ||
                      name == "external";
      // External attention's expansion e gives e·h heads of d_h = d/h (mixers.md §7).
      int64_t expansion =
          mc.options.count("expansion") ? std::stoll(mc.options.at("expansion")) : 1;
      if (per_head) CHECK(first.heads() == 2 * expansion);
    }
  }
}

TEST_CASE("mixing capture: the recorded matrices are the ones the mixers apply") {
  SUBCASE("resmlp and gmlp: their token matrices, masked below the diagonal when causal") {
    for (const char* name : {"resmlp", "gmlp"}) {
      auto m = build64(small_config(name, true));
      auto matrices = capture_one(*m, rand64({1, kN, 8}, 2, false), true);
      Tensor table = param(*m, std::string(name) == "resmlp" ? "A" : "W");
      auto t = table.to_double_vector();
      const auto& mm = matrices.front();
      for (int64_t i = 0; i < kN; ++i)
        for (int64_t j = 0; j < kN; ++j)
          CHECK(mm.at(0, 0, i, j) == doctest::Approx(j <= i ? t[i * 8 + j] : 0.0));
    }
  }
  SUBCASE("mlp-mixer: the channel-mean Jacobian equals finite differences of the mixer") {
    auto m = build64(small_config("mlp-mixer"));
    Tensor x = rand64({1, kN, 8}, 4, false);
    auto matrices = capture_one(*m, x, false);
    REQUIRE(matrices.size() == 1);
    check_close(matrices[0].values, channel_mean_jacobian(*m, x), 1e-6);
  }
  SUBCASE("synth-mix: the components, the weights α and the mixture") {
    auto m = build64(small_config("synth-mix:R+V"));
    auto matrices = capture_one(*m, rand64({1, kN, 8}, 5, false), false);
    std::map<std::string, int> seen;
    for (const auto& mm : matrices) ++seen[mm.what];
    CHECK(seen["component R"] == 1);
    CHECK(seen["component V"] == 1);
    CHECK(seen["mixture weights softmax(θ)"] == 1);
    CHECK(seen["attention"] == 1);
    for (const auto& mm : matrices)
      if (mm.what == "mixture weights softmax(θ)") check_close(mm.values, {0.5, 0.5});
  }
  SUBCASE("fnet: the DFT at each example's own length") {
    auto m = build64(small_config("fnet"));
    Tensor x = rand64({2, kN, 8}, 6, false);
    MixingRecorder recorder(*m);
    NoGradGuard no_grad;
    m->forward(x, context_for(x, {kN, 3}, false));
    const auto& cosine = recorder.matrices().front();
    CHECK(cosine.at(0, 0, 1, 1) == doctest::Approx(std::cos(2 * std::numbers::pi / kN)));
    CHECK(cosine.at(1, 0, 1, 1) == doctest::Approx(std::cos(2 * std::numbers::pi / 3)));
    CHECK(cosine.at(1, 0, 3, 3) == 0.0);  // beyond the second example's length
  }
}

TEST_CASE("mixing capture: a model names each layer's mixer (encoder, decoder self and cross)") {
  Translator t(ModelConfig::from_json(Json::parse(
      R"({"task": "translate", "mixer": "hcsa", "decoder_mixer": "attention", "dim": 16,
          "heads": 2, "layers": 2, "decoder_layers": 2, "max_len": 8, "tgt_max_len": 8,
          "vocab": 10, "tgt_vocab": 7, "dropout": 0.0})")));
  t.eval();
  Tensor src = Tensor::from_data(std::vector<int32_t>{3, 4, 5, 6, 7}, {1, 5});
  Tensor tgt = Tensor::from_data(std::vector<int32_t>{1, 4, 5}, {1, 3});
  MixingRecorder recorder(t);
  NoGradGuard no_grad;
  t.forward(src, {}, tgt, {});
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& m : recorder.matrices()) shapes[m.module] = m.shape;
  CHECK(shapes.size() == 6);
  CHECK(shapes["encoder.layers.0.mixer"] == std::vector<int64_t>{1, 2, 5, 5});
  CHECK(shapes["encoder.layers.1.mixer"] == std::vector<int64_t>{1, 2, 5, 5});
  CHECK(shapes["decoder.layers.1.self_mixer"] == std::vector<int64_t>{1, 2, 3, 3});
  CHECK(shapes["decoder.layers.1.cross"] == std::vector<int64_t>{1, 2, 3, 5});
}
