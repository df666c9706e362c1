// Attention's relative position bias (mixers.md §2, `--mixer-opt rel-bias=W`): the offsets it
// looks up, the equation it adds to, decoding past ℓ and the refusals. Every property of
// plain attention (float64 gradients, padding, causality, decoding, the parameter count) is
// the shared mixer tests' (tests/test_mixers.cpp), which run attention with rel-bias=1 and 3
// and a random table (its test options).
#include "nn/mixers/relative_bias.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// ℓ = 6 tokens; W = 3 puts them on two rows of three.
MixerConfig rel_config(int64_t width, bool causal = false) {
  MixerConfig c = small_config("attention", causal);
  c.max_len = 6;
  c.options["rel-bias"] = std::to_string(width);
  return c;
}

// The mixer in float64 with its bias table set to distinct values (it starts at zero).
std::shared_ptr<Mixer> build_with_table(const MixerConfig& c) {
  auto m = build64(c);
  Tensor table = param(*m, "rel_bias.table");
  std::vector<double> values(static_cast<size_t>(table.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.3 * std::sin(1.7 * double(i) + 0.2);
  set_param(*m, "rel_bias.table", values);
  return m;
}

// The table row of key j's offset from query i on rows of `width`, written out from the
// definition: (Δr, Δc) with Δr clipped to ±(rows − 1), rows of 2·width − 1 columns.
int64_t expected_row(int64_t i, int64_t j, int64_t width, int64_t rows) {
  int64_t dr = j / width - i / width;
  dr = dr < -(rows - 1) ? -(rows - 1) : (dr > rows - 1 ? rows - 1 : dr);
  int64_t dc = j % width - i % width;
  return (dr + rows - 1) * (2 * width - 1) + (dc + width - 1);
}

}  // namespace

TEST_CASE("attention rel-bias: each score gets the table's entry for its 2-D offset and head") {
  // (W, ℓ, N); N > ℓ: rows clipped. Plain variables, not structured bindings, which INFO's
  // lambda cannot capture under clang before 16.
  for (const auto& sizes :
       std::vector<std::array<int64_t, 3>>{{3, 6, 6}, {1, 4, 4}, {1, 4, 7}, {2, 5, 8}}) {
    const int64_t width = sizes[0], max_len = sizes[1], n = sizes[2];
    INFO("W=" << width << " ℓ=" << max_len << " N=" << n);
    RelativePositionBias rel(2, max_len, width);
    int64_t rows = (max_len + width - 1) / width;
    REQUIRE(rel.table.size(0) == (2 * rows - 1) * (2 * width - 1));
    std::vector<double> t(static_cast<size_t>(rel.table.numel()));
    for (size_t i = 0; i < t.size(); ++i) t[i] = double(i);  // entry = its row · 2 + head
    assign_in_place(rel.table, Tensor::from_data(t, rel.table.shape()));
    NoGradGuard no_grad;
    Tensor b = rel.bias(0, n, n);
    REQUIRE(b.shape() == Shape{1, 2, n, n});
    auto got = b.to_double_vector();
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          CHECK(got[size_t((k * n + i) * n + j)] ==
                double(expected_row(i, j, width, rows) * 2 + k));
    // Decoding asks for one query row against the keys so far: the same numbers.
    Tensor row = rel.bias(n - 1, 1, n);
    REQUIRE(row.shape() == Shape{1, 2, 1, n});
    auto row_values = row.to_double_vector();
    for (int64_t j = 0; j < n; ++j) CHECK(row_values[size_t(j)] == got[size_t((n - 1) * n + j)]);
  }
  // On a 7×7 image: 13 × 13 offsets, and a token's right-hand neighbour shares its entry with
  // every other right-hand neighbour (translation equivariance), not with the next row's first.
  RelativePositionBias image(1, 49, 7);
  REQUIRE(image.table.size(0) == 169);
  std::vector<double> distinct(169);
  for (size_t i = 0; i < distinct.size(); ++i) distinct[i] = double(i);
  assign_in_place(image.table, Tensor::from_data(distinct, {169, 1}));
  NoGradGuard no_grad;
  auto b = image.bias(0, 49, 49).to_double_vector();
  auto at = [&](int64_t i, int64_t j) { return b[size_t(i * 49 + j)]; };
  for (int64_t i = 0; i + 1 < 49; ++i)
    if (i % 7 != 6) CHECK(at(i, i + 1) == at(0, 1));
  CHECK(at(6, 7) != at(0, 1));    // the next row's first token: offset (1, −6)…
  CHECK(at(6, 7) == at(13, 14));  // …as from the second row's last token to the third's first
  CHECK(at(0, 8) == at(40, 48));  // (1, 1) anywhere on the grid
}

TEST_CASE("attention rel-bias: the scores are Q Kᵀ/√d_h plus the bias, softmaxed per head") {
  // W_Q = 0 leaves the bias alone in the scores; W_V and W_O the identity make head k's output
  // channels Σ_j softmax_j(B_k[i, ·]) x_j on its own channels: checked against that sum.
  auto m = build_with_table(rel_config(3));
  for (const char* w : {"w_q.weight", "w_q.bias", "w_v.bias", "w_o.bias"})
    set_param(*m, w, std::vector<double>(size_t(param(*m, w).numel()), 0.0));
  std::vector<double> eye(64, 0.0);
  for (int i = 0; i < 8; ++i) eye[size_t(i * 9)] = 1.0;
  set_param(*m, "w_v.weight", eye);
  set_param(*m, "w_o.weight", eye);
  NoGradGuard no_grad;
  Tensor x = rand64({1, 6, 8}, 3, false);
  auto xs = x.to_double_vector();
  auto table = param(*m, "rel_bias.table").to_double_vector();
  auto y = m->forward(x, context_for(x, {}, false)).to_double_vector();
  for (int64_t k = 0; k < 2; ++k) {
    for (int64_t i = 0; i < 6; ++i) {
      std::vector<double> p(6);
      double total = 0;
      for (int64_t j = 0; j < 6; ++j)
        total += p[size_t(j)] = std::exp(table[size_t(expected_row(i, j, 3, 2) * 2 + k)]);
      for (int64_t c = 4 * k; c < 4 * k + 4; ++c) {
        double want = 0;
        for (int64_t j = 0; j < 6; ++j) want += p[size_t(j)] / total * xs[size_t(j * 8 + c)];
        CHECK(y[size_t(i * 8 + c)] == doctest::Approx(want).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("attention rel-bias: parameter count, shape, and the bias changes the output") {
  for (int64_t width : {1, 3}) {
    MixerConfig c = rel_config(width);
    auto m = make_mixer(c);
    int64_t rows = (6 + width - 1) / width;
    CHECK(m->parameter_count() == 4 * 8 * 8 + 4 * 8 + 2 * (2 * rows - 1) * (2 * width - 1));
    CHECK(m->parameter_count() ==
          MixerRegistry::instance().find("attention").expected_parameters(c));
    // The index is a transient buffer: moved with the model, never a checkpoint key.
    for (const auto& [name, t] : m->named_buffers()) CHECK(name.find("index") == std::string::npos);
  }
  auto plain = build64(small_config("attention"));
  auto biased = build_with_table(rel_config(3));  // the same seed: the same projections
  NoGradGuard no_grad;
  Tensor x = rand64({2, 5, 8}, 4, false);
  Tensor y = biased->forward(x, context_for(x, {}, false));
  CHECK(y.shape() == x.shape());
  CHECK(y.to_double_vector() != plain->forward(x, context_for(x, {}, false)).to_double_vector());
}

TEST_CASE("attention rel-bias: the fused core and the equation's path agree, gradients too") {
  auto m = build_with_table(rel_config(3, true));
  Tensor x = rand64({2, 6, 8}, 8);
  Tensor w = rand64({2, 6, 8}, 9, false);
  MixerContext ctx = context_for(x, {6, 4}, true);
  auto fused = output_and_gradients(*m, x, w, ctx, false);
  auto math = output_and_gradients(*m, x, w, ctx, true);  // a recorder: the equation's path
  REQUIRE(fused.size() == math.size());
  for (size_t i = 0; i < fused.size(); ++i) check_close(fused[i], math[i], 1e-10);
}

// The shared mixer tests decode within ℓ; past it the rows' offsets are clipped, which only
// this mixer does, so each step is checked against the full forward there too.
TEST_CASE("attention rel-bias: decoding past ℓ equals the full forward with clipped offsets") {
  check_decoding_equals_forward(*build_with_table(rel_config(3, true)),
                                rand64({2, 8, 8}, 11, false));
}

TEST_CASE("attention rel-bias: cross-attention and a row wider than ℓ are refused by name") {
  MixerConfig cross = rel_config(3);
  cross.cross = true;
  CHECK_THROWS_WITH_AS(make_mixer(cross),
                       doctest::Contains("mixer 'attention' cannot be a cross-mixer "
                                         "(keys and values from memory): rel-bias biases"),
                       MixerSpecError);
  // Refused before any size is known, as the apps check a specification first.
  CHECK_THROWS_WITH_AS(
      MixerRegistry::instance().check_spec("attention", {{"rel-bias", "1"}}, false, true),
      doctest::Contains("cross-attention's keys"), MixerSpecError);
  cross.options["rel-bias"] = "0";  // off: attention attends to memory as ever
  CHECK_NOTHROW(make_mixer(cross));
  CHECK_THROWS_WITH_AS(make_mixer(rel_config(7)), doctest::Contains("at most the maximum length"),
                       MixerSpecError);
  MixerConfig negative = rel_config(3);
  negative.options["rel-bias"] = "-1";
  CHECK_THROWS_AS(make_mixer(negative), MixerSpecError);
}
