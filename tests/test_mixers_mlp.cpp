// Hand-checkable values for the MLP-style mixers (mixers.md §4 mlp-mixer, §5 resmlp, §6 ffonly,
// §9 gmlp/amlp); the shared properties (gradients, padding, causality, decoding) are in
// test_mixers.cpp.
#include <cmath>
#include <map>

#include "nn/layers.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

MixerConfig config(const std::string& name, int64_t d, int64_t h, int64_t l, bool causal = false) {
  MixerConfig c = small_config(name, causal);
  c.dim = d, c.heads = h, c.max_len = l;
  return c;
}

Tensor tensor64(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_data(values, shape);
}

double sample_std(const Tensor& t) {
  auto v = t.to_double_vector();
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / static_cast<double>(v.size()));
}

std::vector<double> identity_mlp_fc1(int64_t l) {  // [4ℓ, ℓ] = [I; −I; 0; 0]
  std::vector<double> w(4 * l * l, 0.0);
  for (int64_t i = 0; i < l; ++i) w[i * l + i] = 1.0, w[(l + i) * l + i] = -1.0;
  return w;
}

std::vector<double> identity_mlp_fc2(int64_t l) {  // [ℓ, 4ℓ] = [I, −I, 0, 0]
  std::vector<double> w(l * 4 * l, 0.0);
  for (int64_t i = 0; i < l; ++i) w[i * 4 * l + i] = 1.0, w[i * 4 * l + l + i] = -1.0;
  return w;
}

}  // namespace

TEST_CASE("mixer values: resmlp with a hand-set A against a hand computation") {
  // ℓ = 4, N = 3: only A[:3, :3] and a[:3] take part (the 9s must not).
  auto m = build64(config("resmlp", 2, 1, 4));
  set_param(*m, "A",
            {1, 2, 0, 9,   //
             0, 1, -1, 9,  //
             3, 0, 1, 9,   //
             9, 9, 9, 9});
  set_param(*m, "a", {0.5, -1, 2, 9});
  NoGradGuard no_grad;
  Tensor x = tensor64({1, 2, 3, -1, 0, 4}, {1, 3, 2});
  // Y0 = 1·(1,2) + 2·(3,−1) + 0.5; Y1 = (3,−1) − (0,4) − 1; Y2 = 3·(1,2) + (0,4) + 2.
  check_close(m->forward(x, context_for(x, {}, false)).to_double_vector(), {7.5, 0.5, 2, -6, 5, 12},
              1e-15);
  // Padded (length 2): column 2 of A is zeroed, so Y1 loses −X2; row 2's contents do not matter.
  Tensor xp = tensor64({1, 2, 3, -1, 50, -70}, {1, 3, 2});
  check_close(rows_of(m->forward(xp, context_for(xp, {2}, false)), 0, 0, 2), {7.5, 0.5, 2, -2},
              1e-15);

  auto c = build64(config("resmlp", 2, 1, 4, true));
  set_param(*c, "A", {1, 2, 0, 9, 0, 1, -1, 9, 3, 0, 1, 9, 9, 9, 9, 9});
  set_param(*c, "a", {0.5, -1, 2, 9});
  // Causal: A ⊙ tril. Y0 = (1,2) + 0.5; Y1 = (3,−1) − 1; Y2 = 3·(1,2) + (0,4) + 2.
  check_close(c->forward(x, context_for(x, {}, true)).to_double_vector(), {1.5, 2.5, 2, -2, 5, 12},
              1e-15);
  // Decoding gives the same rows, and stops at ℓ with an error naming it.
  auto cache = c->new_cache();
  std::vector<double> stepped;
  for (int64_t t = 0; t < 3; ++t)
    for (double v : c->step(contiguous(narrow(x, 1, t, 1)), *cache, context_for(x, {}, true))
                        .to_double_vector())
      stepped.push_back(v);
  check_close(stepped, {1.5, 2.5, 2, -2, 5, 12}, 1e-15);
  c->step(contiguous(narrow(x, 1, 0, 1)), *cache, context_for(x, {}, true));  // position 3 < ℓ
  CHECK_THROWS_WITH_AS(c->step(contiguous(narrow(x, 1, 0, 1)), *cache, context_for(x, {}, true)),
                       doctest::Contains("max_len"), Error);
}

TEST_CASE("mixer values: resmlp ffonly and mlp-mixer initialisation follows the spec") {
  auto r = make_mixer(config("resmlp", 8, 2, 64));
  CHECK(std::abs(sample_std(param(*r, "A")) - 0.02) < 0.002);
  for (double v : param(*r, "a").to_double_vector()) CHECK(v == 0.0);
  CHECK(r->capabilities().block == BlockStyle::ResMLP);

  auto f = make_mixer(config("ffonly", 8, 2, 32));
  CHECK(std::abs(sample_std(param(*f, "fc1.weight")) - 0.02) < 0.002);
  CHECK(std::abs(sample_std(param(*f, "fc2.weight")) - 0.02) < 0.002);
  for (double v : param(*f, "ln_t.weight").to_double_vector()) CHECK(v == 1.0);
  for (double v : param(*f, "ln_t.bias").to_double_vector()) CHECK(v == 0.0);
  CHECK(f->capabilities().block == BlockStyle::NoPreNorm);

  auto m = make_mixer(config("mlp-mixer", 8, 2, 64));  // D_S = 128
  CHECK(param(*m, "w_1.weight").shape() == Shape{128, 64});
  CHECK(std::abs(sample_std(param(*m, "w_1.weight")) - 1.0 / 8) < 0.0125);
  CHECK(std::abs(sample_std(param(*m, "w_2.weight")) - 1.0 / std::sqrt(128.0)) < 0.009);
  for (const char* bias : {"w_1.bias", "w_2.bias"})
    for (double v : param(*m, bias).to_double_vector()) CHECK(v == 0.0);
  // Same seed, same parameters.
  auto m2 = make_mixer(config("mlp-mixer", 8, 2, 64));
  CHECK(param(*m, "w_2.weight").to_double_vector() == param(*m2, "w_2.weight").to_double_vector());
}

TEST_CASE("mixer values: ffonly LN_t statistics ignore padded tokens") {
  // ℓ = 4, d = 1. fc1 = [I; −I; 0; 0], fc2 = [I, −I, 0, 0] make MLP_t the identity
  // (GELU(u) − GELU(−u) = u), so the output is LN_t itself.
  auto m = build64(config("ffonly", 1, 1, 4));
  set_param(*m, "fc1.weight", identity_mlp_fc1(4));
  set_param(*m, "fc2.weight", identity_mlp_fc2(4));
  NoGradGuard no_grad;
  // Valid tokens 1, 2, 3 (mean 2, biased variance 2/3); the padded token 100 must not count.
  double s = std::sqrt(2.0 / 3.0 + 1e-5);
  Tensor x = tensor64({1, 2, 3, 100}, {1, 4, 1});
  check_close(m->forward(x, context_for(x, {3}, false)).to_double_vector(), {-1 / s, 0, 1 / s, 0},
              1e-12);
  // The same three tokens alone (padded to ℓ inside) give the same rows.
  Tensor alone = tensor64({1, 2, 3}, {1, 3, 1});
  check_close(m->forward(alone, context_for(alone, {}, false)).to_double_vector(),
              {-1 / s, 0, 1 / s}, 1e-12);
  // Per-position gain and bias apply at valid positions; invalid entries stay 0.
  set_param(*m, "ln_t.weight", {2, 3, 4, 5});
  set_param(*m, "ln_t.bias", {0.5, 0.25, -1, 7});
  check_close(m->forward(x, context_for(x, {3}, false)).to_double_vector(),
              {-2 / s + 0.5, 0.25, 4 / s - 1, 0}, 1e-12);
  // A sequence of length 0 (count clamped to 1) is all zeros, not NaN.
  check_close(m->forward(x, context_for(x, {0}, false)).to_double_vector(), {0, 0, 0, 0}, 0);
  // One valid token: variance 0, the normalised value is 0 and only the bias remains.
  check_close(rows_of(m->forward(x, context_for(x, {1}, false)), 0, 0, 1), {0.5}, 1e-12);
}

TEST_CASE("mixer values: ffonly at full length without a mask (fused LayerNorm) equals masked") {
  // N = ℓ and no mask takes LN_t through the fused layer_norm kernel; an all-valid mask takes the
  // masked formula. Values and every gradient must agree.
  auto m = build64(config("ffonly", 6, 2, 5));
  set_param(*m, "ln_t.weight", {2, -1, 0.5, 3, 1.5});
  set_param(*m, "ln_t.bias", {0.5, 0.25, -1, 7, 0});
  Tensor x = rand64({3, 5, 6}, 31);
  auto run = [&](const MixerContext& ctx) {
    m->zero_grad();
    x.zero_grad();
    Tensor y = m->forward(x, ctx);
    Tensor w = rand64({3, 5, 6}, 32, false);
    sum(mul(y, w)).backward();
    std::vector<std::vector<double>> out{y.to_double_vector(), x.grad().to_double_vector()};
    for (auto& p : m->parameters()) out.push_back(p.grad().to_double_vector());
    return out;
  };
  MixerContext none = context_for(x, {}, false);
  REQUIRE_FALSE(none.valid.defined());
  auto fused = run(none), masked = run(context_for(x, {5, 5, 5}, false));
  REQUIRE(fused.size() == masked.size());
  for (size_t i = 0; i < fused.size(); ++i) check_close(fused[i], masked[i], 1e-10);
}

TEST_CASE("mixer values: mlp-mixer output for a sequence padded to l equals unpadded") {
  {
    // By hand: ℓ = 2, D_S = 1, W₁ = [1 2], b₁ = 0.5, W₂ = [1; −1], b₂ = (0, 0.25).
    MixerConfig c = config("mlp-mixer", 1, 1, 2);
    c.options["token-hidden"] = "1";
    auto m = build64(c);
    CHECK(m->parameter_count() == 2 * 2 * 1 + 1 + 2);
    set_param(*m, "w_1.weight", {1, 2});
    set_param(*m, "w_1.bias", {0.5});
    set_param(*m, "w_2.weight", {1, -1});
    set_param(*m, "w_2.bias", {0, 0.25});
    NoGradGuard no_grad;
    // N = 1: the input is padded to (0.5, 0): y0 = GELU(0.5 + 0.5) = GELU(1).
    Tensor x1 = tensor64({0.5}, {1, 1, 1});
    check_close(m->forward(x1, context_for(x1, {}, false)).to_double_vector(), {0.8413447460685429},
                1e-14);
    // N = 2 with row 1 padding: same as N = 1.
    Tensor x2 = tensor64({0.5, 1}, {1, 2, 1});
    check_close(rows_of(m->forward(x2, context_for(x2, {1}, false)), 0, 0, 1), {0.8413447460685429},
                1e-14);
    // N = 2 valid: h = GELU(0.5 + 2 + 0.5) = GELU(3) = 3Φ(3); y = (h, −h + 0.25).
    double h = 3 * 0.5 * std::erfc(-3 / std::sqrt(2.0));
    check_close(m->forward(x2, context_for(x2, {}, false)).to_double_vector(), {h, -h + 0.25},
                1e-14);
  }
  // Default sizes: a length-3 sequence alone equals it padded to N = ℓ = 8 with junk rows.
  auto m = build64(config("mlp-mixer", 8, 2, 8));
  NoGradGuard no_grad;
  Tensor padded = rand64({1, 8, 8}, 21, false);
  Tensor alone = contiguous(narrow(padded, 1, 0, 3));
  check_close(rows_of(m->forward(padded, context_for(padded, {3}, false)), 0, 0, 3),
              rows_of(m->forward(alone, context_for(alone, {}, false)), 0, 0, 3), 1e-12);
  // The junk rows do change the output when they are declared valid (the test can fail).
  CHECK(rows_of(m->forward(padded, context_for(padded, {}, false)), 0, 0, 3) !=
        rows_of(m->forward(alone, context_for(alone, {}, false)), 0, 0, 3));
}

TEST_CASE("mixer values: gmlp starts as a plain FFN-like unit") {
  auto m = build64(config("gmlp", 8, 2, 8));
  CHECK(m->capabilities().block == BlockStyle::Unit);
  // W uniform ±1e-3/ℓ (and not all zero), b = 1.
  double bound = 1e-3 / 8, largest = 0;
  for (double v : param(*m, "W").to_double_vector()) {
    CHECK(std::abs(v) <= bound);
    largest = std::max(largest, std::abs(v));
  }
  CHECK(largest > bound / 2);
  for (double v : param(*m, "b").to_double_vector()) CHECK(v == 1.0);
  CHECK(param(*m, "U.weight").shape() == Shape{32, 8});  // f = 4d
  CHECK(param(*m, "V.weight").shape() == Shape{8, 16});  // f/2 → d

  NoGradGuard no_grad;
  Tensor x = rand64({2, 5, 8}, 22, false);
  // G ≈ 1, so the unit ≈ Z₁ V + b_V, an FFN over the first half of the hidden units.
  Tensor z1 = narrow(gelu(linear(x, param(*m, "U.weight"), param(*m, "U.bias"))), 2, 0, 16);
  Tensor ffn = linear(z1, param(*m, "V.weight"), param(*m, "V.bias"));
  auto y = m->forward(x, context_for(x, {}, false)).to_double_vector();
  auto want = ffn.to_double_vector();
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(y[i] - want[i]));
  CHECK(worst > 0);     // W does contribute
  CHECK(worst < 1e-2);  // but only a little
  // With W = 0 it is exactly that FFN; with a per-position b, row i is scaled by b[i].
  set_param(*m, "W", std::vector<double>(64, 0.0));
  check_close(m->forward(x, context_for(x, {}, false)).to_double_vector(), want, 1e-12);
  set_param(*m, "b", {2, -1, 0.5, 3, 0, 7, 7, 7});
  Tensor scaled = linear(mul(z1, tensor64({2, -1, 0.5, 3, 0}, {5, 1})), param(*m, "V.weight"),
                         param(*m, "V.bias"));
  check_close(m->forward(x, context_for(x, {}, false)).to_double_vector(),
              scaled.to_double_vector(), 1e-12);
}

TEST_CASE("mixer values: gmlp spatial gating with a hand-set W") {
  // G = W LN(Z₂) + b: with b = 0 and W = e_{0,1} (row 0 reads position 1), row 0's gate is
  // LN(Z₂) of row 1, rows 1 and 2 get gate 0 (the unit gives b_V there).
  auto m = build64(config("gmlp", 8, 2, 8));
  std::vector<double> w(64, 0.0);
  w[0 * 8 + 1] = 1.0;
  set_param(*m, "W", w);
  set_param(*m, "b", std::vector<double>(8, 0.0));
  set_param(*m, "V.bias", {1, 2, 3, 4, 5, 6, 7, 8});
  NoGradGuard no_grad;
  Tensor x = rand64({1, 3, 8}, 23, false);
  Tensor z = gelu(linear(x, param(*m, "U.weight"), param(*m, "U.bias")));
  Tensor z1 = narrow(z, 2, 0, 16);
  Tensor zn = layer_norm(narrow(z, 2, 16, 16), param(*m, "ln.weight"), param(*m, "ln.bias"));
  Tensor row0 = linear(mul(narrow(z1, 1, 0, 1), narrow(zn, 1, 1, 1)), param(*m, "V.weight"),
                       param(*m, "V.bias"));
  Tensor y = m->forward(x, context_for(x, {}, false));
  check_close(rows_of(y, 0, 0, 1), row0.to_double_vector(), 1e-12);
  check_close(rows_of(y, 0, 1, 3), {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8}, 1e-12);
  // Position 1 padded: column 1 of W is zeroed and row 0's gate becomes 0 too.
  check_close(rows_of(m->forward(x, context_for(x, {1}, false)), 0, 0, 1), {1, 2, 3, 4, 5, 6, 7, 8},
              1e-12);
}

TEST_CASE("mixer values: amlp adds a single-head attention to the gate") {
  MixerConfig c = config("amlp", 8, 2, 8);
  c.options["attn-dim"] = "4";
  auto m = build64(c);
  // f = 32: gMLP's 528 plus 3·8·4 + 4·16 + 16.
  CHECK(m->parameter_count() == 528 + 96 + 64 + 16);
  std::map<std::string, Shape> want{
      {"U.weight", {32, 8}},  {"U.bias", {32}},       {"ln.weight", {16}},
      {"ln.bias", {16}},      {"W", {8, 8}},          {"b", {8}},
      {"V.weight", {8, 16}},  {"V.bias", {8}},        {"w_q.weight", {4, 8}},
      {"w_k.weight", {4, 8}}, {"w_v.weight", {4, 8}}, {"w_o.weight", {16, 4}},
      {"w_o.bias", {16}}};
  std::map<std::string, Shape> got;
  for (const auto& [n, t] : m->named_parameters()) got[n] = t.shape();
  CHECK(got == want);
  // One token: its softmax is 1, so with W = 0 and b = 0 the gate is v W_o + b_o exactly.
  set_param(*m, "W", std::vector<double>(64, 0.0));
  set_param(*m, "b", std::vector<double>(8, 0.0));
  set_param(*m, "w_o.bias", std::vector<double>(16, 0.25));
  NoGradGuard no_grad;
  Tensor x = rand64({1, 1, 8}, 24, false);
  Tensor z1 = narrow(gelu(linear(x, param(*m, "U.weight"), param(*m, "U.bias"))), 2, 0, 16);
  Tensor gate = linear(linear(x, param(*m, "w_v.weight"), Tensor()), param(*m, "w_o.weight"),
                       param(*m, "w_o.bias"));
  Tensor want_y = linear(mul(gate, z1), param(*m, "V.weight"), param(*m, "V.bias"));
  check_close(m->forward(x, context_for(x, {}, false)).to_double_vector(),
              want_y.to_double_vector(), 1e-12);
  // A length-0 sequence: every key masked, attention weights 0, the gate is b_o alone.
  Tensor gate0 = linear(mul(tensor64(std::vector<double>(16, 0.25), {1, 1, 16}), z1),
                        param(*m, "V.weight"), param(*m, "V.bias"));
  check_close(m->forward(x, context_for(x, {0}, false)).to_double_vector(),
              gate0.to_double_vector(), 1e-12);
}

TEST_CASE("mixer values: amlp's stacked q, k, v product equals three separate products") {
  // forward() projects q, k and v in one product (w_q, w_k, w_v stacked) that the attention core
  // reads in place; under a mixing capture it runs the three products of the formula. Outputs and
  // every gradient must agree: padded, and causal.
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "padded"));
    MixerConfig c = config("amlp", 8, 2, 6, causal);
    c.options["attn-dim"] = "4";
    auto m = build64(c);
    Tensor x = rand64({2, 6, 8}, 41);
    Tensor w = rand64({2, 6, 8}, 42, false);
    MixerContext ctx =
        context_for(x, causal ? std::vector<int32_t>{} : std::vector<int32_t>{6, 4}, causal);
    auto stacked = output_and_gradients(*m, x, w, ctx, false);
    auto three = output_and_gradients(*m, x, w, ctx, true);  // the formula's three products
    REQUIRE(stacked.size() == three.size());
    for (size_t i = 0; i < stacked.size(); ++i) check_close(stacked[i], three[i], 1e-12);
  }
}

TEST_CASE("mixer values: mlp options and refusals") {
  MixerConfig c = config("gmlp", 8, 2, 8);
  c.options["hidden"] = "12";
  auto m = make_mixer(c);
  CHECK(m->parameter_count() == MixerRegistry::instance().find("gmlp").expected_parameters(c));
  CHECK(param(*m, "U.weight").shape() == Shape{12, 8});
  c.options["hidden"] = "7";
  CHECK_THROWS_WITH_AS(make_mixer(c), doctest::Contains("even"), Error);
  for (const char* name : {"mlp-mixer", "ffonly"}) {
    INFO(name);
    CHECK_THROWS_WITH_AS(make_mixer(config(name, 8, 2, 8, true)),
                         doctest::Contains("cannot be causal"), Error);
  }
}

TEST_CASE("mixer values: resmlp gmlp and amlp decoding caches reorder like beam search") {
  for (const char* name : {"resmlp", "gmlp", "amlp"}) {
    INFO(name);
    MixerConfig c = config(name, 8, 2, 8, true);
    if (std::string(name) == "amlp") c.options["attn-dim"] = "4";
    auto m = build64(c);
    NoGradGuard no_grad;
    Tensor x = rand64({2, 5, 8}, 25, false);
    MixerContext ctx = context_for(x, {}, true);
    auto cache = m->new_cache();
    REQUIRE(cache->reorderable());
    for (int64_t t = 0; t < 3; ++t) m->step(contiguous(narrow(x, 1, t, 1)), *cache, ctx);
    // Hypotheses {1, 1, 0}: continue each with its own last two rows.
    reorder_cache(*cache, {1, 1, 0});
    Tensor prefix = concat({narrow(x, 0, 1, 1), narrow(x, 0, 1, 1), narrow(x, 0, 0, 1)}, 0);
    Tensor rest = rand64({3, 2, 8}, 26, false);
    Tensor full_in = concat({narrow(prefix, 1, 0, 3), rest}, 1);
    Tensor full = m->forward(full_in, context_for(full_in, {}, true));
    for (int64_t t = 0; t < 2; ++t) {
      Tensor y = m->step(contiguous(narrow(rest, 1, t, 1)), *cache, ctx);
      for (int b = 0; b < 3; ++b)
        check_close(rows_of(y, b, 0, 1), rows_of(full, b, 3 + t, 4 + t), 1e-10);
    }
  }
}
