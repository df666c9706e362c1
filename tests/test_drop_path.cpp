// Stochastic depth (nn/drop_path.h): a sequence's branch is kept whole (scaled by 1/(1-p)) or
// dropped whole at rate p, packed rows get their sequence's factor, the gradient in float64,
// evaluation and p = 0 are the identity and draw nothing, the blocks' linear rates, the model
// config, and the train commands' --drop-path applied and recorded.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nn/drop_path.h"
#include "nn/models.h"
#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/model_configs.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// The child of `m` at a dotted path such as "encoder.layers.2.drop_path" (null when absent).
std::shared_ptr<Module> child_at(const Module& m, const std::string& path) {
  const Module* here = &m;
  std::shared_ptr<Module> found;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string name = path.substr(start, dot == std::string::npos ? dot : dot - start);
    found = nullptr;
    for (const auto& [n, c] : here->children())
      if (n == name) found = c;
    if (!found) return nullptr;
    here = found.get();
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return found;
}

Exit run_drop_path_app(TempDir& dir, const std::string& args) {
  static int calls = 0;
  return run_app_shell(args, dir.file("drop-path-log-" + std::to_string(calls++) + ".txt"));
}

}  // namespace

TEST_CASE("drop_path: each sequence's branch is kept whole, scaled by 1/(1-p), or dropped whole") {
  const int64_t batch = 4000;
  for (double p : {0.1, 0.5}) {
    CAPTURE(p);
    Tensor h = add(mul(rand32({batch, 3, 2}, 1), 0.0), 1.0);  // all ones
    std::vector<float> out = drop_path(h, p, 99).to_float_vector();
    int64_t dropped = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const float first = out[static_cast<size_t>(b * 6)];
      CHECK((first == 0.0f || std::fabs(first - 1.0 / (1.0 - p)) < 1e-6));
      for (int64_t i = 1; i < 6; ++i) CHECK(out[static_cast<size_t>(b * 6 + i)] == first);
      dropped += first == 0.0f;
    }
    // Within four standard deviations of the binomial's mean.
    CHECK(std::fabs(dropped - batch * p) < 4 * std::sqrt(batch * p * (1 - p)));
  }
}

TEST_CASE("drop_path: packed rows get their sequence's factor, the padded batch's") {
  const std::vector<int32_t> lengths{3, 1, 2, 3};
  const TokenRows rows = token_rows(lengths, 3, Device::cpu());
  REQUIRE(rows.defined());
  Tensor padded = rand32({4, 3, 2}, 7);
  bool some_dropped = false, some_kept = false;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    std::vector<float> a = drop_path(padded, 0.5, seed).to_float_vector();
    std::vector<float> b =
        unpack_rows(drop_path(pack_rows(padded, rows), 0.5, seed, rows), rows).to_float_vector();
    for (int64_t s = 0; s < 4; ++s)
      for (int64_t t = 0; t < lengths[static_cast<size_t>(s)]; ++t)
        for (int64_t c = 0; c < 2; ++c) {
          const size_t i = static_cast<size_t>((s * 3 + t) * 2 + c);
          CHECK(a[i] == b[i]);
          (a[i] == 0.0f ? some_dropped : some_kept) = true;
        }
  }
  CHECK(some_dropped);
  CHECK(some_kept);
  CHECK_THROWS_WITH_AS(drop_path(rand32({5, 2}, 1), 0.5, 1, rows),
                       doctest::Contains("[5,2] does not hold the 9 rows"), Error);
}

TEST_CASE("gradcheck: drop_path, padded and on rows") {
  using Inputs = std::vector<Tensor>;
  CHECK_GRADS([](const Inputs& x) { return drop_path(x[0], 0.4, 3); },
              Inputs{rand64({6, 2, 3}, 1)});
  const TokenRows rows = token_rows({2, 1, 3}, 3, Device::cpu());
  CHECK_GRADS([&](const Inputs& x) { return drop_path(x[0], 0.4, 5, rows); },
              Inputs{rand64({6, 4}, 2)});
}

TEST_CASE("drop_path: evaluation and p = 0 are the identity and draw nothing") {
  Tensor h = rand32({4, 3, 2}, 3);
  DropPath off(0.0), on(0.5);
  const uint64_t before = default_generator().counter();
  CHECK(off.forward(h, {}).to_float_vector() == h.to_float_vector());
  CHECK(drop_path(h, 0.0, 1).to_float_vector() == h.to_float_vector());
  on.eval();
  CHECK(on.forward(h, {}).to_float_vector() == h.to_float_vector());
  CHECK(default_generator().counter() == before);
  on.train();
  on.forward(h, {});
  CHECK(default_generator().counter() == before + 1);
  CHECK_THROWS_AS(drop_path(h, 1.0, 1), Error);
}

TEST_CASE("drop_path: block l of L gets rate p*l/L, and evaluation matches the model without") {
  ModelConfig c = tiny_classifier("attention");
  c.layers = 4;
  ModelConfig with = c;
  with.drop_path = 0.4;
  Classifier plain(c), deep(with);
  for (int64_t l = 0; l < 4; ++l) {
    CAPTURE(l);
    auto block = child_at(deep, "encoder.layers." + std::to_string(l) + ".drop_path");
    REQUIRE(block);
    CHECK(std::dynamic_pointer_cast<DropPath>(block)->p == doctest::Approx(0.1 * (l + 1)));
    CHECK_FALSE(child_at(plain, "encoder.layers." + std::to_string(l) + ".drop_path"));
  }
  ModelConfig translator = tiny_translator("attention", "attention");
  translator.drop_path = 0.3;
  Translator t(translator);
  auto first = child_at(t, "decoder.layers.0.drop_path"),
       last = child_at(t, "decoder.layers.1.drop_path");
  REQUIRE(first);
  REQUIRE(last);
  CHECK(std::dynamic_pointer_cast<DropPath>(first)->p == doctest::Approx(0.15));
  CHECK(std::dynamic_pointer_cast<DropPath>(last)->p == doctest::Approx(0.3));

  // No parameters and no draws of the initialiser: the same weights, so evaluation agrees.
  Tensor ids = Tensor::from_data(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  plain.eval();
  deep.eval();
  CHECK(plain.forward(ids).to_float_vector() == deep.forward(ids).to_float_vector());
  deep.train();
  CHECK(plain.forward(ids).to_float_vector() != deep.forward(ids).to_float_vector());
}

TEST_CASE("drop_path: the model config writes the rate only when on, reads it back, refuses 1") {
  ModelConfig c = tiny_classifier("gmlp");
  CHECK_FALSE(c.to_json().contains("drop_path"));
  c.drop_path = 0.25;
  CHECK(ModelConfig::from_json(c.to_json()).drop_path == 0.25);
  Json bad = c.to_json();
  bad.set("drop_path", 1.0);
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(bad), doctest::Contains("drop_path 1"), Error);
}

TEST_CASE("drop_path app: --drop-path changes training, is recorded, and a resume keeps it") {
  TempDir dir;
  std::ofstream(dir.file("text.tsv")) << "a\tx y\nb\ty z\na\tx x\nb\tz z\na\tx\nb\tz\n"
                                      << "a\tx y x\nb\tz y z\na\ty x\nb\ty z\nb\tz\na\ty\n";
  const std::string base = "classify train --data " + dir.file("text.tsv") +
                           " --dim 16 --heads 2 --layers 2 --batch 4 --steps 4 --threads 1 "
                           "--quiet --dropout 0 ";
  Exit plain = run_drop_path_app(dir, base + "--out " + dir.file("plain"));
  INFO(plain.output);
  REQUIRE(plain.code == 0);
  Exit deep = run_drop_path_app(dir, base + "--drop-path 0.5 --out " + dir.file("deep"));
  INFO(deep.output);
  REQUIRE(deep.code == 0);
  CHECK(contains(read_file(dir.file("deep") + "/model.json"), "\"drop_path\":0.5"));
  CHECK_FALSE(contains(read_file(dir.file("plain") + "/model.json"), "drop_path"));
  CHECK(contains(read_file(dir.file("deep") + "/config.ini"), "drop-path=0.5"));
  // Applied: the same seed trains other weights; deterministic: the same command, the same bytes.
  const std::string weights = read_file(dir.file("deep") + "/last.safetensors");
  CHECK(weights != read_file(dir.file("plain") + "/last.safetensors"));
  Exit again = run_drop_path_app(dir, base + "--drop-path 0.5 --out " + dir.file("again"));
  REQUIRE(again.code == 0);
  CHECK(read_file(dir.file("again") + "/last.safetensors") == weights);
  // A resumed run builds its model from the stored config, stochastic depth included.
  Exit resumed = run_drop_path_app(
      dir, "classify train --resume --steps 6 --threads 1 --quiet --out " + dir.file("deep"));
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  CHECK(contains(read_file(dir.file("deep") + "/model.json"), "\"drop_path\":0.5"));
}
