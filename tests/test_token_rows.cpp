// The models' blocks on the real tokens alone (nn/token_rows.h): the rows of a padded batch, the
// take_rows op that packs them and puts them back, and the models giving the padded path's logits,
// loss and every gradient with padding skipped, for mixers that override forward_rows (attention)
// and mixers that take its default (the rest). In float64, so the two paths must agree to rounding.
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "nn/token_rows.h"
#include "tests/model_configs.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

constexpr int32_t kPadId = 0;

// Two blocks a side and ℓ = 6, so that every mixer runs stacked.
ModelConfig small_translator(const std::string& encoder, const std::string& decoder) {
  ModelConfig c = tiny_translator(encoder, decoder);
  c.layers = 2;
  c.max_len = c.tgt_max_len = 6;
  c.vocab = 11;
  c.tgt_vocab = 9;
  return c;
}

ModelConfig pooled_token_classifier(const std::string& mixer, PoolKind pool) {
  ModelConfig c = tiny_classifier(mixer);
  c.layers = 2;
  c.max_len = pool == PoolKind::Cls ? 8 : 7;  // the class token takes a position
  c.vocab = 12;
  c.classes = 4;
  c.pool = pool;
  return c;
}

// A padded batch: row b holds lengths[b] ids in [1, vocab), then kPadId.
Tensor padded_ids(const std::vector<int32_t>& lengths, int64_t n, int64_t vocab, int32_t salt) {
  std::vector<int32_t> ids;
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t t = 0; t < n; ++t)
      ids.push_back(t < lengths[b] ? static_cast<int32_t>(1 + (b * 5 + t * 3 + salt) % (vocab - 1))
                                   : kPadId);
  return Tensor::from_data(ids, {static_cast<int64_t>(lengths.size()), n});
}

// The values at valid positions of a [B, N, ...] tensor, in order.
std::vector<double> valid_values(const Tensor& x, const std::vector<int32_t>& lengths) {
  std::vector<double> all = x.to_double_vector(), out;
  int64_t n = x.size(1), width = x.numel() / (x.size(0) * n);
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t i = 0; i < lengths[b] * width; ++i) out.push_back(all[b * n * width + i]);
  return out;
}

std::vector<double> gradients(Module& m) {
  std::vector<double> out;
  for (const auto& named : m.named_parameters()) {  // not a binding: clang's INFO captures it
    INFO(named.first);
    REQUIRE(named.second.grad().defined());
    for (double v : named.second.grad().to_double_vector()) out.push_back(v);
  }
  return out;
}

struct TranslatorRun {
  std::vector<double> logits, grads;
  double loss = 0;
  bool skipped = false;
};

TranslatorRun run_translator(const ModelConfig& c, bool skip,
                             std::vector<int32_t> src_len = {6, 3, 5, 1},
                             std::vector<int32_t> tgt_len = {5, 2, 6, 4}) {
  Translator m(c);
  m.to(DType::F64);
  m.set_padding_rows(skip ? PaddingRows::Skip : PaddingRows::Keep);
  Tensor src = padded_ids(src_len, 6, c.vocab, 0), tgt = padded_ids(tgt_len, 6, c.tgt_vocab, 2);
  Tensor out = padded_ids(tgt_len, 6, c.tgt_vocab, 5);
  Tensor logits = m.forward(src, src_len, tgt, tgt_len);
  Tensor loss = cross_entropy(logits, out, kPadId, 0.1);
  loss.backward();
  return {valid_values(logits, tgt_len), gradients(m), loss.item(), m.skips_padding()};
}

}  // namespace

TEST_CASE("token rows: the real tokens' places, and none when nothing is padded") {
  TokenRows rows = token_rows({2, 0, 3}, 3, Device::cpu());
  REQUIRE(rows.defined());
  CHECK(rows.batch == 3);
  CHECK(rows.length == 3);
  CHECK(rows.index.to_int_vector() == std::vector<int32_t>{0, 1, 6, 7, 8});
  // Grouped by length, shortest first: [3] (length 1), [2] (length 2), [0] (length 3).
  TokenRows grouped = token_rows({3, 1, 2}, 3, Device::cpu());
  CHECK(grouped.index.to_int_vector() == std::vector<int32_t>{3, 6, 7, 0, 1, 2});
  CHECK(grouped.place.to_int_vector() == std::vector<int32_t>{3, 4, 5, 0, -1, -1, 1, 2, -1});
  REQUIRE(grouped.groups.size() == 3);
  CHECK(grouped.groups[0].count == 1);
  CHECK(grouped.groups[2].length == 3);
  CHECK_FALSE(token_rows({3, 3}, 3, Device::cpu()).defined());  // no padding
  CHECK_FALSE(token_rows({}, 3, Device::cpu()).defined());      // every position valid
  CHECK_FALSE(token_rows({0, 0}, 3, Device::cpu()).defined());  // no real token
  CHECK_THROWS_WITH_AS(token_rows({4}, 3, Device::cpu()), "token_rows: length 4 outside [0, 3]",
                       Error);

  Tensor x = rand64({3, 3, 2}, 1, false);
  Tensor packed = pack_rows(x, rows);
  CHECK(packed.shape() == Shape{5, 2});
  std::vector<double> xv = x.to_double_vector(),
                      back = unpack_rows(packed, rows).to_double_vector();
  for (int64_t i = 0; i < 18; ++i) {
    int64_t row = i / 2, b = row / 3, t = row % 3;
    bool real = t < std::vector<int64_t>{2, 0, 3}[b];
    CHECK(back[i] == (real ? xv[i] : 0.0));
  }
  CHECK_THROWS_WITH_AS(unpack_rows(rand64({4, 2}, 2, false), rows),
                       "unpack_rows: x [4,2] does not have the 5 rows of the batch", Error);
  CHECK(rows.place.to_int_vector() == std::vector<int32_t>{0, 1, -1, -1, -1, -1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(
      take_rows(rand64({2, 2}, 3, false), Tensor::from_data(std::vector<int32_t>{0, 5}, {2}),
                Tensor::from_data(std::vector<int32_t>{0, 1}, {2})),
      "take_rows: take index 5 is out of range for x of shape [2,2]", Error);
}

TEST_CASE("token rows: a translator skipping its padding gives the padded path's loss and grads") {
  // attention and gmlp/amlp override forward_rows; the others take the default (placed back,
  // mixed, taken again).
  for (const char* decoder :
       {"attention", "gmlp", "amlp", "hcsa", "lightconv", "synth-dense", "resmlp"}) {
    for (const char* encoder : {"attention", "mlp-mixer", "fnet"}) {
      INFO(encoder << " encoder, " << decoder << " decoder");
      ModelConfig c = small_translator(encoder, decoder);
      TranslatorRun padded = run_translator(c, false), rows = run_translator(c, true);
      CHECK_FALSE(padded.skipped);
      CHECK(rows.skipped);
      CHECK(rows.loss == doctest::Approx(padded.loss).epsilon(1e-12));
      check_close(rows.logits, padded.logits, 1e-10);
      check_close(rows.grads, padded.grads, 1e-10);
    }
  }
}

TEST_CASE(
    "token rows: cross-attention's groups: shared lengths, an empty source, an empty target") {
  // Sequences 0 and 2 share (6, 5) and form one group of two; sequence 3 has no source token
  // (its queries see no key: 0, then W_O's bias) and sequence 4 no target token.
  for (const char* decoder : {"attention", "gmlp"}) {
    INFO(decoder);
    ModelConfig c = small_translator("attention", decoder);
    std::vector<int32_t> src_len{6, 3, 6, 0, 2}, tgt_len{5, 2, 5, 3, 0};
    TranslatorRun padded = run_translator(c, false, src_len, tgt_len);
    TranslatorRun rows = run_translator(c, true, src_len, tgt_len);
    CHECK(rows.loss == doctest::Approx(padded.loss).epsilon(1e-12));
    check_close(rows.logits, padded.logits, 1e-10);
    check_close(rows.grads, padded.grads, 1e-10);
  }
  // A source with no padding is not packed: the queries' rows are placed beside it.
  ModelConfig full = small_translator("attention", "attention");
  TranslatorRun padded = run_translator(full, false, {6, 6, 6}, {5, 2, 6});
  TranslatorRun rows = run_translator(full, true, {6, 6, 6}, {5, 2, 6});
  check_close(rows.logits, padded.logits, 1e-10);
  check_close(rows.grads, padded.grads, 1e-10);
  TokenRows queries = token_rows({5, 2, 5}, 6, Device::cpu(), {1, 0, 2});
  TokenRows keys = token_rows({6, 3, 6}, 6, Device::cpu(), {1, 0, 2});
  std::vector<CrossGroup> groups = cross_groups(queries, keys);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].count == 1);
  CHECK(groups[0].query_length == 2);
  CHECK(groups[0].key_length == 3);
  CHECK(groups[1].count == 2);
  CHECK(cross_groups(queries, token_rows({6, 3, 6}, 6, Device::cpu(), {2, 1, 0})).empty());
}

TEST_CASE("token rows: the encoder's padded states are exact zeros when it skipped them") {
  Translator m(small_translator("attention", "attention"));
  NoGradGuard no_grad;
  std::vector<int32_t> len{2, 6};
  Tensor src = padded_ids(len, 6, 11, 0);
  for (bool skip : {true, false}) {
    m.set_padding_rows(skip ? PaddingRows::Skip : PaddingRows::Keep);
    Memory mem = m.encode(src, len);
    CHECK(mem.packed.defined() == skip);
    std::vector<float> states = mem.states.to_float_vector();
    double padding = 0;
    for (int64_t i = 2 * 16; i < 6 * 16; ++i) padding += std::abs(states[i]);  // row 0, t >= 2
    if (skip)
      CHECK(padding == 0.0);
    else
      CHECK(padding > 0.0);  // the padded path normalises whatever the padding held
  }
}

TEST_CASE("token rows: decoding is the same either way") {
  Translator m(small_translator("attention", "attention"));
  m.eval();
  std::vector<int32_t> len{6, 3, 1};
  Tensor src = padded_ids(len, 6, 11, 4);
  DecodeOptions greedy, beam;
  greedy.max_len = beam.max_len = 5;
  beam.beam = 3;
  m.set_padding_rows(PaddingRows::Keep);
  auto greedy_padded = m.generate(src, len, greedy), beam_padded = m.generate(src, len, beam);
  m.set_padding_rows(PaddingRows::Skip);
  CHECK(m.generate(src, len, greedy) == greedy_padded);
  CHECK(m.generate(src, len, beam) == beam_padded);
}

TEST_CASE("token rows: a padding-dependent mixer keeps the padded path") {
  ModelConfig c = small_translator("fnet", "attention");
  c.mixer_options = {{"fnet-padded", "true"}};
  Translator t(c);
  CHECK_FALSE(t.skips_padding());
  ModelConfig k = pooled_token_classifier("fnet", PoolKind::Mean);
  k.mixer_options = {{"fnet-padded", "true"}};
  Classifier m(k);
  CHECK_FALSE(m.skips_padding());
  m.set_padding_rows(PaddingRows::Skip);
  CHECK_FALSE(m.skips_padding());  // not even when asked: the padding reaches its outputs
}

TEST_CASE("token rows: Auto skips the padding on the CPU only, Skip and Keep decide everywhere") {
  Translator t(small_translator("attention", "attention"));
  CHECK(t.skips_padding(Device::cpu()));
  CHECK_FALSE(t.skips_padding(Device::cuda()));  // a host-bound GPU step: docs/gpu.md
  t.set_padding_rows(PaddingRows::Skip);
  CHECK(t.skips_padding(Device::cuda()));
  t.set_padding_rows(PaddingRows::Keep);
  CHECK_FALSE(t.skips_padding(Device::cpu()));
  Classifier c(pooled_token_classifier("attention", PoolKind::Mean));
  CHECK(c.skips_padding());
  CHECK_FALSE(c.skips_padding(Device::cuda()));
}

TEST_CASE("token rows: a token classifier skipping its padding gives the padded path's grads") {
  for (PoolKind pool : {PoolKind::Mean, PoolKind::Cls}) {
    for (const char* mixer : {"attention", "gmlp", "amlp", "mlp-mixer", "external", "linformer"}) {
      INFO(mixer << (pool == PoolKind::Cls ? " cls" : " mean"));
      std::vector<double> logits[2], grads[2];
      double loss[2];
      for (bool skip : {false, true}) {
        ModelConfig c = pooled_token_classifier(mixer, pool);
        Classifier m(c);
        m.to(DType::F64);
        m.set_padding_rows(skip ? PaddingRows::Skip : PaddingRows::Keep);
        CHECK(m.skips_padding() == skip);
        std::vector<int32_t> len{7, 2, 4};
        Tensor out = m.forward(padded_ids(len, 7, c.vocab, 1), len);
        Tensor labels = Tensor::from_data(std::vector<int32_t>{1, 3, 0}, {3});
        Tensor l = cross_entropy(out, labels);
        l.backward();
        logits[skip] = out.to_double_vector();
        grads[skip] = gradients(m);
        loss[skip] = l.item();
      }
      CHECK(loss[1] == doctest::Approx(loss[0]).epsilon(1e-12));
      check_close(logits[1], logits[0], 1e-10);
      check_close(grads[1], grads[0], 1e-10);
    }
  }
}
