// The two model families: structure, names, padding, incremental decoding equal to teacher
// forcing, beam search, and every mixer training a little inside a classifier and a translator.
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "tests/model_configs.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// Plain SGD on every parameter (the optimizers have their own tests).
void sgd_step(Module& m, double lr) {
  NoGradGuard no_grad;
  for (auto& p : m.parameters())
    if (p.grad().defined()) p.copy_(sub(p, mul(p.grad(), lr)));
  m.zero_grad();
}

}  // namespace

TEST_CASE("models: parameter names are dotted paths and print shows the tree") {
  Translator t(tiny_translator("attention", "attention"));
  bool found = false;
  for (auto& [name, p] : t.named_parameters())
    found = found || name == "encoder.layers.0.mixer.w_v.weight";
  CHECK(found);
  std::string tree = t.print();
  CHECK(tree.find("DecoderBlock") != std::string::npos);
  CHECK(tree.find("parameters: " + std::to_string(t.parameter_count())) != std::string::npos);
  ModelConfig back = ModelConfig::from_json(Json::parse(t.config().to_json().dump()));
  CHECK(back.to_json() == t.config().to_json());
}

TEST_CASE("models: the config's closed choices are enums written as the same names as before") {
  ModelConfig c;
  c.task = ModelTask::Translate;
  c.input = InputKind::Image;
  c.pool = PoolKind::Cls;
  c.positions = PositionKind::Sinusoidal;
  // The JSON every checkpoint stores keeps the words older checkpoints hold.
  const Json j = c.to_json();
  CHECK(j.at("task").as_string() == "translate");
  CHECK(j.at("input").as_string() == "image");
  CHECK(j.at("pool").as_string() == "cls");
  CHECK(j.at("positions").as_string() == "sinusoidal");
  ModelConfig back = ModelConfig::from_json(j);
  CHECK(back.task == ModelTask::Translate);
  CHECK(back.input == InputKind::Image);
  CHECK(back.pool == PoolKind::Cls);
  CHECK(back.positions == PositionKind::Sinusoidal);
  // A wrong name is refused naming the field, the value and the valid names.
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(Json::parse(R"({"task": "regress"})")),
                       "task 'regress' is not one of: classify, translate", Error);
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(Json::parse(R"({"input": "audio"})")),
                       "input 'audio' is not one of: tokens, image", Error);
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(Json::parse(R"({"pool": "max"})")),
                       "pool 'max' is not one of: mean, cls", Error);
  CHECK_THROWS_AS(ModelConfig::from_json(Json::parse(R"({"positions": "rotary"})")), Error);
}

namespace {
bool has_parameter(const Module& m, const std::string& name) {
  for (const auto& [n, p] : m.named_parameters())
    if (n == name) return true;
  return false;
}
}  // namespace

TEST_CASE("models: a resmlp decoder ends with the affine map, as its encoder does (§5)") {
  Translator resmlp(tiny_translator("resmlp", "resmlp"));
  CHECK(has_parameter(resmlp, "encoder.final_norm.affine.alpha"));
  CHECK(has_parameter(resmlp, "decoder.final_norm.affine.alpha"));
  CHECK(has_parameter(resmlp, "decoder.final_norm.affine.beta"));
  CHECK_FALSE(has_parameter(resmlp, "decoder.final_norm.ln.weight"));
  // Any other decoder keeps its LayerNorm under the same keys as before.
  Translator attention(tiny_translator("resmlp", "attention"));
  CHECK(has_parameter(attention, "decoder.final_norm.ln.weight"));
  CHECK_FALSE(has_parameter(attention, "decoder.final_norm.affine.alpha"));

  // The count of §1 and §5, term by term: d = 16, ℓ = 8, f = 4d, vocabularies 10 and 7.
  const int64_t d = 16, l = 8, f = 4 * d;
  const int64_t ffn = d * f + f + f * d + d;
  const int64_t encoder_block = (l * l + l) + 6 * d + ffn;  // Aff₁,₂ γ₁,₂
  const int64_t decoder_block = (l * l + l) + (4 * d * d + 4 * d) + 9 * d + ffn;  // Aff₁..₃ γ₁..₃
  const int64_t expected = 10 * d + 7 * d + l * d + l * d  // embeddings and learned positions
                           + encoder_block + 2 * d         // 1 encoder block, final affine
                           + 2 * decoder_block + 2 * d     // 2 decoder blocks, final affine
                           + d * 7 + 7;                    // head
  CHECK(resmlp.parameter_count() == expected);

  // Behaviour: a LayerNorm removes a shift shared by every channel, the affine map does not.
  // Shifting the last decoder block's FFN output bias shifts every channel of its output alike
  // (γ₃ starts at 0.1 in every channel), so only the resmlp decoder's logits move.
  Tensor src = Tensor::from_data(std::vector<int32_t>{3, 4, 5, 6}, {1, 4});
  Tensor tgt = Tensor::from_data(std::vector<int32_t>{1, 4, 5}, {1, 3});
  auto logits_after_shift = [&](Translator& m, double shift) {
    NoGradGuard no_grad;
    m.eval();
    for (auto& [n, p] : m.named_parameters())
      if (n == "decoder.layers.1.ffn.fc2.bias") p.copy_(add(p, shift));
    return m.forward(src, {}, tgt, {}).to_float_vector();
  };
  auto before = logits_after_shift(resmlp, 0.0), after = logits_after_shift(resmlp, 5.0);
  double moved = 0;
  for (size_t i = 0; i < before.size(); ++i)
    moved = std::max(moved, std::fabs(double(after[i] - before[i])));
  CHECK(moved > 1e-3);
  before = logits_after_shift(attention, 0.0), after = logits_after_shift(attention, 5.0);
  for (size_t i = 0; i < before.size(); ++i)
    CHECK(after[i] == doctest::Approx(before[i]).epsilon(1e-4));
}

TEST_CASE("models: image classifier cuts 28x28 into 49 patches") {
  ModelConfig c = tiny_classifier("attention");
  c.input = InputKind::Image;
  c.max_len = 49;
  Classifier m(c);
  Tensor images = rand32({2, 28 * 28}, 1);
  CHECK(m.forward(images).shape() == Shape{2, 3});
  c.pool = PoolKind::Cls;
  c.max_len = 50;
  Classifier with_cls(c);
  CHECK(with_cls.forward(images).shape() == Shape{2, 3});
}

TEST_CASE("models: classifier output ignores padded tokens") {
  Classifier m(tiny_classifier("attention"));
  m.eval();
  NoGradGuard no_grad;
  Tensor a = Tensor::from_data(std::vector<int32_t>{1, 2, 3, 0, 0, 4, 5, 6, 7, 8}, {2, 5});
  Tensor b = Tensor::from_data(std::vector<int32_t>{1, 2, 3, 9, 9, 4, 5, 6, 7, 8}, {2, 5});
  auto ya = m.forward(a, {3, 5}).to_float_vector();
  auto yb = m.forward(b, {3, 5}).to_float_vector();
  for (size_t i = 0; i < ya.size(); ++i) CHECK(ya[i] == doctest::Approx(yb[i]).epsilon(1e-6));
}

TEST_CASE("models: incremental decoding gives the teacher-forced logits") {
  for (const char* decoder : {"attention", "hcsa", "lightconv", "synth-dense", "gmlp", "resmlp"}) {
    if (!MixerRegistry::instance().contains(decoder)) continue;
    INFO(decoder);
    Translator m(tiny_translator("attention", decoder));
    m.eval();
    NoGradGuard no_grad;
    Tensor src = Tensor::from_data(std::vector<int32_t>{3, 4, 5, 6, 7, 8, 0, 0}, {2, 4});
    std::vector<int32_t> src_len{4, 2};
    Tensor tgt = Tensor::from_data(std::vector<int32_t>{1, 4, 5, 6, 1, 3, 3, 2}, {2, 4});
    Memory mem = m.encode(src, src_len);
    auto full = m.decode(mem, tgt, {}).to_float_vector();  // [2, 4, 7]
    auto state = m.start(mem);
    auto tv = tgt.to_int_vector();
    for (int t = 0; t < 4; ++t) {
      auto step = m.step(state, {tv[t], tv[4 + t]}).to_float_vector();  // [2, 7]
      for (int b = 0; b < 2; ++b)
        for (int v = 0; v < 7; ++v)
          CHECK(step[b * 7 + v] == doctest::Approx(full[(b * 4 + t) * 7 + v]).epsilon(1e-5));
    }
  }
}

TEST_CASE("models: beam search of width 1 equals greedy and wider beams decode") {
  Translator m(tiny_translator("attention", "attention"));
  m.eval();
  Tensor src = Tensor::from_data(std::vector<int32_t>{3, 4, 5, 6, 7, 8, 0, 0}, {2, 4});
  DecodeOptions o;
  o.max_len = 6;
  auto greedy = m.generate(src, {4, 2}, o);
  o.beam = 1;
  CHECK(m.generate(src, {4, 2}, o) == greedy);
  o.beam = 3;
  auto beam = m.generate(src, {4, 2}, o);
  REQUIRE(beam.size() == 2);
  for (auto& seq : beam) CHECK(seq.size() <= 6);
}

namespace {

// Next-token probabilities that depend only on the newest token: from <bos>, x 0.55 and y 0.45;
// after x, <eos> 0.4 and x, y 0.3 each; after y, <eos> 0.98. Greedy says "x" (0.22); the best
// whole output is "y" (0.441).
class NewestTokenScorer : public NextTokenScorer {
 public:
  static constexpr int32_t kX = 3, kY = 4;
  std::vector<float> next_log_probs(const std::vector<int32_t>& tokens) override {
    std::vector<float> out;
    for (int32_t t : tokens) {
      std::vector<double> p(5, 0.0);
      if (t == 1) p = {0.0, 0.0, 0.0, 0.55, 0.45};
      if (t == kX) p = {0.0, 0.0, 0.4, 0.3, 0.3};
      if (t == kY || t == 2) p = {0.0, 0.0, 0.98, 0.01, 0.01};
      for (double v : p) out.push_back(static_cast<float>(std::log(v)));
    }
    rows_seen.push_back(tokens.size());
    return out;
  }
  void reorder(const std::vector<int32_t>& index) override { reorders.push_back(index); }
  std::vector<size_t> rows_seen;
  std::vector<std::vector<int32_t>> reorders;
};

}  // namespace

TEST_CASE("models: beam search finds the likelier whole output that greedy misses") {
  DecodeOptions o;
  o.max_len = 5;
  o.length_penalty = 0;
  NewestTokenScorer greedy_scorer;
  CHECK(greedy_search(greedy_scorer, 1, o) == std::vector<std::vector<int32_t>>{{3}});
  o.beam = 2;
  NewestTokenScorer beam_scorer;
  auto two = beam_search(beam_scorer, 2, o);  // two identical items, rows i*2 + j
  CHECK(two == std::vector<std::vector<int32_t>>{{4}, {4}});
  REQUIRE_FALSE(beam_scorer.reorders.empty());
  CHECK(beam_scorer.reorders[0] == std::vector<int32_t>{0, 0, 1, 1});  // beams start as copies
  for (size_t rows : beam_scorer.rows_seen) CHECK(rows == 4);
}

TEST_CASE("models: an ensemble decodes by the mean of its models' probabilities") {
  Translator a(tiny_translator("attention", "attention"));
  ModelConfig other = tiny_translator("attention", "attention");
  other.seed = 11;
  other.dim = 8;  // an ensemble may mix architectures that share the vocabularies
  Translator b(other);
  a.eval();
  b.eval();
  Tensor src = Tensor::from_data(std::vector<int32_t>{3, 4, 5, 6, 7, 8, 0, 0}, {2, 4});
  std::vector<int32_t> len{4, 2};
  DecodeOptions o;
  o.max_len = 6;
  for (int64_t beam : {1, 3}) {
    o.beam = beam;
    INFO("beam " << beam);
    CHECK(generate_ensemble({&a}, src, len, o) == a.generate(src, len, o));
    CHECK(generate_ensemble({&a, &a}, src, len, o) == a.generate(src, len, o));
  }
  // The first greedy token is the argmax of (p_a + p_b) / 2 after <bos>.
  NoGradGuard no_grad;
  auto sa = a.start(a.encode(src, len)), sb = b.start(b.encode(src, len));
  auto pa = softmax(a.step(sa, {1, 1}), -1).to_float_vector();
  auto pb = softmax(b.step(sb, {1, 1}), -1).to_float_vector();
  o.beam = 1;
  o.max_len = 1;
  auto first = generate_ensemble({&a, &b}, src, len, o);
  for (int row = 0; row < 2; ++row) {
    int best = 0;
    for (int v = 1; v < 7; ++v)
      if (pa[row * 7 + v] + pb[row * 7 + v] > pa[row * 7 + best] + pb[row * 7 + best]) best = v;
    if (best == 2) {
      CHECK(first[row].empty());  // <eos> first: an empty output
    } else {
      CHECK(first[row] == std::vector<int32_t>{best});
    }
  }
  ModelConfig wide_vocab = tiny_translator("attention", "attention");
  wide_vocab.tgt_vocab = 9;
  Translator c(wide_vocab);
  c.eval();
  CHECK_THROWS_WITH_AS(generate_ensemble({&a, &c}, src, len, o), doctest::Contains("target tokens"),
                       Error);
}

TEST_CASE("models: every mixer trains a little in a classifier and a translator") {
  Tensor ids = Tensor::from_data(
      std::vector<int32_t>{1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 9, 1, 2, 2, 3, 0, 0, 0, 9, 8, 7, 6, 5, 0},
      {4, 6});
  std::vector<int32_t> lengths{4, 6, 3, 5};
  Tensor labels = Tensor::from_data(std::vector<int32_t>{0, 1, 2, 1}, {4});
  Tensor tgt_in = Tensor::from_data(
      std::vector<int32_t>{1, 3, 4, 5, 1, 6, 5, 0, 1, 3, 3, 0, 1, 4, 0, 0}, {4, 4});
  Tensor tgt_out = Tensor::from_data(
      std::vector<int32_t>{3, 4, 5, 2, 6, 5, 2, 0, 3, 3, 2, 0, 4, 2, 0, 0}, {4, 4});
  std::vector<int32_t> tgt_len{4, 3, 3, 2};
  for (const auto& info : MixerRegistry::instance().all()) {
    const std::string& name = info.test_names.front();
    INFO(name);
    Classifier c(tiny_classifier(name));
    double first = 0, last = 0;
    for (int s = 0; s < 8; ++s) {
      Tensor loss = cross_entropy(c.forward(ids, lengths), labels);
      if (s == 0) first = loss.item();
      last = loss.item();
      loss.backward();
      sgd_step(c, 0.1);
    }
    CHECK(last < first);
    std::string decoder = info.capabilities.causal ? name : "attention";
    Translator t(tiny_translator(name, decoder));
    for (int s = 0; s < 8; ++s) {
      Tensor loss = cross_entropy(t.forward(ids, lengths, tgt_in, tgt_len), tgt_out, 0);
      if (s == 0) first = loss.item();
      last = loss.item();
      loss.backward();
      sgd_step(t, 0.1);
    }
    CHECK(last < first);
  }
}
