// `mixlab inspect` through the executable, on tiny untrained models saved here: one heatmap per
// layer, head and captured matrix for every registered mixer, index.html showing each of them,
// mixing.safetensors holding matrices whose rows obey their rules, image classifiers drawn over
// the image, and clear usage errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "autograd/grad_mode.h"
#include "nn/mixer_registry.h"
#include "nn/mixing_capture.h"
#include "nn/models.h"
#include "tests/cli_runner.h"
#include "tests/temp_dir.h"
#include "train/run/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train/data/vocab.h"

using namespace mixlab;
using mixlab::testing::CliResult;
using mixlab::testing::mixlab_cli;
using mixlab::testing::read_file;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kWords = {"the", "Cat", "sat", "on", "a", "Mat", "today"};

ModelConfig inspected_token_classifier(const std::string& mixer) {
  ModelConfig c;
  c.mixer = mixer;
  c.dim = 16;
  c.heads = 2;
  c.layers = 2;
  c.max_len = 10;
  c.vocab = static_cast<int64_t>(Vocab::build({kWords}).size());
  c.classes = 3;
  c.dropout = 0.0;
  return c;
}

void save(const std::string& path, const Module& model, const ModelConfig& c,
          const std::string& vocab_src, const std::string& vocab_tgt = "") {
  Json extra = Json::object();
  extra.set("labels", "neg\nneutral\npos");
  save_weights(path, model,
               {{"config", c.to_json().dump()},
                {"vocab_src", vocab_src},
                {"vocab_tgt", vocab_tgt},
                {"extra", extra.dump()}});
}

// (heads of every matrix the model hands over for `ids`): the expected heatmap count.
int64_t expected_heatmaps(Classifier& model, const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  model.eval();
  MixingRecorder recorder(model);
  model.forward(Tensor::from_data(ids, {1, static_cast<int64_t>(ids.size())}));
  int64_t n = 0;
  for (const auto& m : recorder.matrices()) n += m.heads();
  return n;
}

int64_t count_files(const fs::path& dir, const std::string& part = "") {
  int64_t n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) ++n;
  return n;
}

}  // namespace

TEST_CASE("inspect app: every mixer, one heatmap per layer and head, rows as the mixer says") {
  testing::TempDir dir;
  Vocab vocab = Vocab::build({kWords});
  std::vector<std::string> names;
  for (const auto& info : MixerRegistry::instance().all())
    for (const auto& n : info.test_names) names.push_back(n);
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string& name = names[k];
    INFO(name);
    ModelConfig c = inspected_token_classifier(name);
    Classifier model(c);
    std::string ck = dir.file("ck.safetensors");
    save(ck, model, c, vocab.to_string());
    std::string out = dir.file("out-" + std::to_string(k));
    CliResult r = mixlab_cli("inspect --checkpoint " + ck +
                             " --input 'the Cat sat on a Mat' --out " + out + " --threads 1");
    INFO(r.output);
    REQUIRE(r.code == 0);
    int64_t expected =
        expected_heatmaps(model, vocab.encode(tokenize_words("the Cat sat on a Mat")));
    CHECK(count_files(fs::path(out) / "heatmaps") == expected);
    // Both layers are there, each with every head of its first matrix.
    for (const char* layer : {"encoder-layers-0-mixer", "encoder-layers-1-mixer"})
      CHECK(count_files(fs::path(out) / "heatmaps", layer) >= 1);
    std::string html = read_file(out + "/index.html");
    for (const auto& e : fs::directory_iterator(fs::path(out) / "heatmaps"))
      CHECK(html.find("heatmaps/" + e.path().filename().string()) != std::string::npos);
    // Token labels keep their case and reach the pictures.
    bool labelled = false;
    for (const auto& e : fs::directory_iterator(fs::path(out) / "heatmaps"))
      labelled = labelled || read_file(e.path()).find(">Cat<") != std::string::npos;
    CHECK(labelled);

    SafetensorsFile f = load_safetensors(out + "/mixing.safetensors");
    Json described = Json::parse(f.metadata.at("matrices"));
    REQUIRE(described.size() == f.tensors.size());
    for (size_t i = 0; i < described.size(); ++i) {
      const Json& d = described.at(i);
      const TensorRecord& t = f.at(d.at("name").as_string());
      REQUIRE(t.shape.size() == 4);
      CHECK(static_cast<int64_t>(d.at("row_labels").size()) == t.shape[2]);
      if (d.at("rule").as_string() != row_rule_text(RowRule::SumToOne)) continue;
      std::vector<double> v(t.bytes.size() / sizeof(double));
      std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
      for (int64_t row = 0; row < t.shape[0] * t.shape[1] * t.shape[2]; ++row) {
        double s = 0;
        for (int64_t j = 0; j < t.shape[3]; ++j) s += v[row * t.shape[3] + j];
        CHECK(std::abs(s - 1.0) < 1e-5);  // float32 model
      }
    }
  }
}

TEST_CASE("inspect app: a translator shows encoder, decoder self and cross matrices") {
  testing::TempDir dir;
  Vocab src = Vocab::build({kWords}), tgt = Vocab::build({{"Le", "chat", "assis"}});
  ModelConfig c = ModelConfig::from_json(Json::parse(
      R"({"task": "translate", "mixer": "fnet", "decoder_mixer": "hcsa", "dim": 16, "heads": 2,
          "layers": 1, "decoder_layers": 1, "max_len": 10, "tgt_max_len": 6})"));
  c.vocab = static_cast<int64_t>(src.size());
  c.tgt_vocab = static_cast<int64_t>(tgt.size());
  Translator model(c);
  save(dir.file("t.safetensors"), model, c, src.to_string(), tgt.to_string());
  CliResult r = mixlab_cli("inspect --checkpoint " + dir.file("t.safetensors") +
                           " --input 'the Cat sat' --target 'Le chat' --out " + dir.file("o"));
  INFO(r.output);
  REQUIRE(r.code == 0);
  fs::path maps = fs::path(dir.file("o")) / "heatmaps";
  CHECK(count_files(maps, "encoder-layers-0-mixer-token-dft") == 2);  // cos and sin, one head
  CHECK(count_files(maps, "decoder-layers-0-self-mixer") == 2);       // two heads
  CHECK(count_files(maps, "decoder-layers-0-cross") == 2);
  std::string cross =
      read_file((maps / "03-decoder-layers-0-cross-cross-attention-h0.svg").string());
  CHECK(cross.find("&lt;bos&gt;") != std::string::npos);  // target rows
  CHECK(cross.find(">Cat<") != std::string::npos);        // source columns

  // A target the model cannot read is refused, naming what is wrong, and nothing is written:
  // neither mapped to <unk> nor cut to tgt_max_len - 1 = 5 tokens.
  for (const auto& [target, expected] :
       {std::pair{"'Le chien assis'", "not in the model's target vocabulary: chien"},
        std::pair{"'Le chat assis Le chat assis'", "--target has 6 tokens"}}) {
    CliResult refused =
        mixlab_cli("inspect --checkpoint " + dir.file("t.safetensors") +
                   " --input 'the Cat sat' --target " + target + " --out " + dir.file("refused"));
    INFO(refused.output);
    CHECK(refused.code == 2);
    CHECK(refused.output.find(expected) != std::string::npos);
    CHECK_FALSE(fs::exists(dir.file("refused") + "/index.html"));
    CHECK_FALSE(fs::exists(dir.file("refused") + "/mixing.safetensors"));
  }
}

TEST_CASE("inspect app: an image classifier's patches drawn over the image") {
  testing::TempDir dir;
  // A test set of two 28x28 images in IDX format.
  auto be32 = [](std::string& s, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
  };
  std::string images, labels;
  be32(images, 0x803), be32(images, 2), be32(images, 28), be32(images, 28);
  for (int p = 0; p < 2 * 28 * 28; ++p) images.push_back(static_cast<char>(p % 251));
  be32(labels, 0x801), be32(labels, 2);
  labels += std::string("\x03\x07", 2);
  std::ofstream(dir.file("t10k-images-idx3-ubyte"), std::ios::binary) << images;
  std::ofstream(dir.file("t10k-labels-idx1-ubyte"), std::ios::binary) << labels;
  ModelConfig c = ModelConfig::from_json(Json::parse(
      R"({"mixer": "attention", "input": "image", "patch": 7, "max_len": 16, "dim": 16,
          "heads": 2, "layers": 1, "classes": 10})"));
  Classifier model(c);
  save(dir.file("img.safetensors"), model, c, "");
  CliResult r = mixlab_cli("inspect --checkpoint " + dir.file("img.safetensors") +
                           " --image 1 --data " + dir.path() + " --out " + dir.file("o"));
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(count_files(fs::path(dir.file("o")) / "patches") == 2);  // one per head
  std::string svg =
      read_file((*fs::directory_iterator(fs::path(dir.file("o")) / "patches")).path().string());
  CHECK(svg.find("data:image/png;base64,") != std::string::npos);
  CHECK(svg.find("patch 15") != std::string::npos);  // 16 query patches

  CliResult missing = mixlab_cli("inspect --checkpoint " + dir.file("img.safetensors") + " --out " +
                                 dir.file("o2"));
  CHECK(missing.code == 2);
  CHECK(missing.output.find("--image") != std::string::npos);
  CliResult beyond = mixlab_cli("inspect --checkpoint " + dir.file("img.safetensors") +
                                " --image 2 --data " + dir.path() + " --out " + dir.file("o3"));
  CHECK(beyond.code == 2);
  CHECK(beyond.output.find("has 2 images") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("o3")));
}
