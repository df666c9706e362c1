// Weights-only export and the checkpoint key convention (train/run/checkpoint.h,
// checkpoint_names.h, float16.h): float16 conversion, the export's size and exact decoding, and an
// older checkpoint (a committed fixture written by the code before the renaming) still loading and
// decoding as it did when it was written.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "tests/fixtures/translator_fixture.h"
#include "tests/temp_dir.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/models.h"
#include "train/run/checkpoint.h"
#include "train/run/checkpoint_names.h"
#include "train/run/float16.h"
#include "train/optim/optimizer.h"
#include "io/safetensors.h"

using namespace mixlab;
namespace fs = std::filesystem;

namespace {

using fixture::translator_config;

std::vector<std::vector<int32_t>> greedy(Translator& model) {
  model.eval();
  DecodeOptions options;
  options.max_len = 6;
  return model.generate(fixture::source(), fixture::kSourceLengths, options);
}

// A training checkpoint of a translator after a few Adam steps (so it has optimizer state).
void write_trained_checkpoint(Translator& model, const std::string& path) {
  Adam adam(param_groups(model, 0.0), AdamOptions{.lr = 0.05});
  fixture::train(model, adam, 5);
  TrainingState state;
  state.step = adam.steps_taken();
  state.config_json = model.config().to_json().dump();
  state.vocab_src = "source vocabulary text";
  state.extra["labels"] = "kept";
  save_checkpoint(path, model, adam, state);
}

}  // namespace

TEST_CASE("float16: every half survives half -> float -> half, and rounding is to nearest even") {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float f = half_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      CHECK(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    REQUIRE_MESSAGE(float_to_half(f) == bits, "half bits ", bits);
  }
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);  // the largest half
  CHECK(float_to_half(65519.0f) == 0x7bff);  // below half way to 65536: rounds down
  CHECK(float_to_half(65520.0f) == 0x7c00);  // half way, odd mantissa: to even, i.e. infinity
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);  // the smallest subnormal
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);  // half way to it: to even, 0
  CHECK(float_to_half(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie: even (down)
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie: even (up)
  // Any float in range lands on the nearer of the two halves around it.
  Generator gen(5);
  for (int i = 0; i < 20000; ++i) {
    const float f = static_cast<float>(gen.uniform(-65000.0, 65000.0) *
                                       std::pow(2.0, -static_cast<double>(gen.below(30))));
    const uint16_t h = float_to_half(f);
    const float rounded = half_to_float(h);
    // The neighbouring half on the other side of f (one step away from zero or towards it).
    const float other = half_to_float(static_cast<uint16_t>(
        std::fabs(f) > std::fabs(rounded) ? h + 1 : (h & 0x7fff ? h - 1 : h)));
    INFO(f, " -> ", rounded, " (other ", other, ")");
    CHECK(std::fabs(f - rounded) <= std::fabs(f - other));
    CHECK(std::fabs(f - rounded) <=
          std::max(std::fabs(f) * std::ldexp(1.0f, -11), std::ldexp(1.0f, -25)));
  }
}

TEST_CASE("checkpoint names: old decoder keys map to the encoder's convention") {
  CHECK(current_checkpoint_key("decoder.0.self_mixer.w_q.weight") ==
        "decoder.layers.0.self_mixer.w_q.weight");
  CHECK(current_checkpoint_key("decoder.12.norm1.ln.bias") == "decoder.layers.12.norm1.ln.bias");
  CHECK(current_checkpoint_key("decoder_norm.weight") == "decoder.final_norm.ln.weight");
  CHECK(current_checkpoint_key("optimizer.decoder.1.ffn.fc1.weight.exp_avg") ==
        "optimizer.decoder.layers.1.ffn.fc1.weight.exp_avg");
  CHECK(current_checkpoint_key("optimizer.decoder_norm.bias.exp_avg_sq") ==
        "optimizer.decoder.final_norm.ln.bias.exp_avg_sq");
  for (const char* current : {"decoder.layers.0.cross.w_k.weight", "decoder.final_norm.ln.weight",
                              "encoder.layers.0.mixer.w_q.weight", "encoder.final_norm.ln.bias",
                              "src_embed.weight", "head.bias", "decoder_x.0.y"})
    CHECK(current_checkpoint_key(current) == current);
}

TEST_CASE("translator keys: both stacks named alike") {
  Translator model(translator_config());
  std::vector<std::string> names;
  for (const auto& [name, t] : model.named_tensors()) names.push_back(name);
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  CHECK(has("encoder.layers.0.norm1.ln.weight"));
  CHECK(has("encoder.final_norm.ln.weight"));
  CHECK(has("decoder.layers.1.norm1.ln.weight"));
  CHECK(has("decoder.final_norm.ln.weight"));
  for (const auto& n : names) {
    INFO(n);
    CHECK(current_checkpoint_key(n) == n);  // nothing the model writes is an old name
  }
}

TEST_CASE("export: weights only, at most 40% of the checkpoint, decodes identically in f32") {
  testing::TempDir dir;
  Translator trained(translator_config());
  write_trained_checkpoint(trained, dir.file("best.safetensors"));
  export_weights(dir.file("best.safetensors"), dir.file("export.safetensors"), ExportDType::F32);

  const auto full = fs::file_size(dir.file("best.safetensors"));
  const auto exported = fs::file_size(dir.file("export.safetensors"));
  INFO(full, " -> ", exported);
  CHECK(exported * 10 <= full * 4);
  const SafetensorsFile file = load_safetensors(dir.file("export.safetensors"));
  for (const auto& r : file.tensors) CHECK(r.name.rfind("optimizer.", 0) == std::string::npos);
  CHECK(file.metadata.at("mixlab.format") == "weights/1");
  CHECK(file.metadata.at("config") == trained.config().to_json().dump());
  CHECK(file.metadata.at("vocab_src") == "source vocabulary text");
  CHECK(file.metadata.at("extra") == R"({"labels":"kept"})");
  CHECK(file.metadata.at("exported_at_step") == "5");
  for (const char* training_only : {"step", "epoch", "optimizer", "rng_seed", "loader_position"})
    CHECK_FALSE(file.metadata.count(training_only));

  Translator from_checkpoint(translator_config()), from_export(translator_config());
  load_weights(dir.file("best.safetensors"), from_checkpoint);
  load_weights(dir.file("export.safetensors"), from_export);
  const auto a = from_checkpoint.named_tensors(), b = from_export.named_tensors();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].second.to_double_vector() == b[i].second.to_double_vector());
  }
  CHECK(greedy(from_export) == greedy(from_checkpoint));
}

TEST_CASE("export: f16 halves the tensor data, weights within half precision, widened on load") {
  testing::TempDir dir;
  Translator trained(translator_config());
  write_trained_checkpoint(trained, dir.file("best.safetensors"));
  export_weights(dir.file("best.safetensors"), dir.file("f32.safetensors"), ExportDType::F32);
  export_weights(dir.file("best.safetensors"), dir.file("f16.safetensors"), ExportDType::F16);
  auto data_bytes = [&](const std::string& name) {  // the tensors; the header is the rest
    size_t total = 0;
    for (const auto& r : load_safetensors(dir.file(name)).tensors) total += r.bytes.size();
    return total;
  };
  CHECK(data_bytes("f16.safetensors") * 2 == data_bytes("f32.safetensors"));
  for (const auto& r : load_safetensors(dir.file("f16.safetensors")).tensors)
    CHECK(r.dtype == "F16");  // a translator has only F32 tensors

  Translator full(translator_config()), half(translator_config());
  load_weights(dir.file("f32.safetensors"), full);
  load_weights(dir.file("f16.safetensors"), half);
  const auto a = full.named_tensors(), b = half.named_tensors();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    REQUIRE(b[i].second.dtype() == DType::F32);
    const auto x = a[i].second.to_double_vector(), y = b[i].second.to_double_vector();
    for (size_t j = 0; j < x.size(); ++j)  // round to nearest: within half an ulp of 11 bits
      CHECK(std::fabs(x[j] - y[j]) <=
            std::max(std::fabs(x[j]) * std::ldexp(1.0, -11), std::ldexp(1.0, -25)));
  }
  // Re-exporting the loaded f16 model changes nothing: the rounding happened once.
  save_weights(dir.file("again.safetensors"), half, {{"config", half.config().to_json().dump()}});
  export_weights(dir.file("again.safetensors"), dir.file("again16.safetensors"), ExportDType::F16);
  CHECK(load_safetensors(dir.file("again16.safetensors")).tensors[0].bytes ==
        load_safetensors(dir.file("f16.safetensors")).tensors[0].bytes);
}

TEST_CASE("export: refuses a value beyond the float16 range, writing nothing") {
  testing::TempDir dir;
  Translator model(translator_config());
  {
    NoGradGuard no_grad;
    model.named_tensors()[0].second.fill_(1e5);
  }
  save_weights(dir.file("big.safetensors"), model, {{"config", model.config().to_json().dump()}});
  CHECK_THROWS_WITH_AS(
      export_weights(dir.file("big.safetensors"), dir.file("out.safetensors"), ExportDType::F16),
      doctest::Contains("beyond the float16 range"), Error);
  CHECK_FALSE(fs::exists(dir.file("out.safetensors")));
  export_weights(dir.file("big.safetensors"), dir.file("out.safetensors"), ExportDType::F32);
  CHECK(fs::exists(dir.file("out.safetensors")));
}

TEST_CASE(
    "an older checkpoint (decoder.N.*, decoder_norm.*) loads, resumes and decodes as before") {
  const std::string fixture =
      std::string(MIXLAB_SOURCE_DIR) + "/tests/fixtures/old_names_translator.safetensors";
  const SafetensorsFile raw = load_safetensors(fixture);
  REQUIRE(raw.find("decoder_norm.weight") != nullptr);  // it really is in the old names
  REQUIRE(raw.find("decoder.0.norm1.ln.weight") != nullptr);

  Translator model(translator_config());
  load_weights(fixture, model);
  // What make_old_names_fixture.cpp printed when it wrote the file, with the code of that time.
  CHECK(greedy(model) == std::vector<std::vector<int32_t>>{{4, 4, 3}, {3, 6}});
  {
    NoGradGuard no_grad;
    // That sum includes the logits at the padded positions, which the blocks computed then; on
    // the real tokens alone (nn/token_rows.h, the default since) they are zeros, so the padded
    // path gives it.
    model.set_padding_rows(PaddingRows::Keep);
    CHECK(
        sum(model.forward(fixture::source(), fixture::kSourceLengths, fixture::target_in(), {4, 3}))
            .item() == doctest::Approx(1.428778).epsilon(1e-5));
    model.set_padding_rows(PaddingRows::Auto);
  }

  // Resuming: the optimizer's tensors and per-parameter steps are renamed too.
  Translator resumed(translator_config());
  Adam adam(param_groups(resumed, 0.0), AdamOptions{.lr = 0.05});
  const TrainingState state = load_checkpoint(fixture, resumed, adam);
  CHECK(state.step == 20);
  CHECK(adam.state_json().at("param_steps").find("decoder.layers.0.norm1.ln.weight") != nullptr);
  CHECK(adam.state_json().at("param_steps").at("decoder.final_norm.ln.bias").as_int64() == 20);

  // Exporting it writes today's names.
  testing::TempDir dir;
  export_weights(fixture, dir.file("new.safetensors"), ExportDType::F32);
  const SafetensorsFile exported = load_safetensors(dir.file("new.safetensors"));
  CHECK(exported.find("decoder.final_norm.ln.weight") != nullptr);
  CHECK(exported.find("decoder_norm.weight") == nullptr);
}
