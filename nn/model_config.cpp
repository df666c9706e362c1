#include "nn/model_config.h"

#include <sstream>

#include "core/enum_names.h"

namespace mixlab {

namespace {
constexpr EnumName<ModelTask> kTaskNames[] = {{ModelTask::Classify, "classify"},
                                              {ModelTask::Translate, "translate"}};
constexpr EnumName<InputKind> kInputNames[] = {{InputKind::Tokens, "tokens"},
                                               {InputKind::Image, "image"}};
constexpr EnumName<PoolKind> kPoolNames[] = {{PoolKind::Mean, "mean"}, {PoolKind::Cls, "cls"}};
constexpr EnumName<ImageStem> kStemNames[] = {{ImageStem::Patch, "patch"},
                                              {ImageStem::Conv, "conv"}};

Json options_json(const std::map<std::string, std::string>& options) {
  Json out = Json::object();
  for (const auto& [k, v] : options) out.set(k, Json(v));
  return out;
}
std::map<std::string, std::string> options_from(const Json& j) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : j.as_object()) out[k] = v.as_string();
  return out;
}
}  // namespace

std::string to_string(ModelTask task) { return enum_to_string(kTaskNames, task); }
std::string to_string(InputKind input) { return enum_to_string(kInputNames, input); }
std::string to_string(PoolKind pool) { return enum_to_string(kPoolNames, pool); }
std::string to_string(ImageStem stem) { return enum_to_string(kStemNames, stem); }
ModelTask parse_model_task(std::string_view name) { return enum_parse(kTaskNames, "task", name); }
InputKind parse_input_kind(std::string_view name) { return enum_parse(kInputNames, "input", name); }
PoolKind parse_pool_kind(std::string_view name) { return enum_parse(kPoolNames, "pool", name); }
ImageStem parse_image_stem(std::string_view name) { return enum_parse(kStemNames, "stem", name); }

Json ModelConfig::to_json() const {
  Json j = Json::object();
  j.set("task", to_string(task));
  j.set("mixer", mixer);
  j.set("mixer_options", options_json(mixer_options));
  j.set("decoder_mixer", decoder_mixer);
  j.set("decoder_mixer_options", options_json(decoder_mixer_options));
  j.set("cross", cross);
  j.set("dim", dim);
  j.set("heads", heads);
  j.set("layers", layers);
  j.set("decoder_layers", decoder_layers);
  j.set("ffn_dim", ffn_dim);
  j.set("max_len", max_len);
  j.set("tgt_max_len", tgt_max_len);
  j.set("dropout", dropout);
  if (drop_path > 0) j.set("drop_path", drop_path);  // absent: off (as in older checkpoints)
  j.set("positions", to_string(positions));
  j.set("input", to_string(input));
  j.set("vocab", vocab);
  j.set("classes", classes);
  j.set("image_channels", image_channels);
  j.set("image_height", image_height);
  j.set("image_width", image_width);
  j.set("patch", patch);
  if (stem != ImageStem::Patch) j.set("stem", to_string(stem));  // absent: patch (older files)
  j.set("pool", to_string(pool));
  j.set("tgt_vocab", tgt_vocab);
  j.set("tie_output", tie_output);
  j.set("seed", static_cast<int64_t>(seed));
  return j;
}

ModelConfig ModelConfig::from_json(const Json& j) {
  ModelConfig c;
  for (const auto& [key, v] : j.as_object()) {
    if (key == "task")
      c.task = parse_model_task(v.as_string());
    else if (key == "mixer")
      c.mixer = v.as_string();
    else if (key == "mixer_options")
      c.mixer_options = options_from(v);
    else if (key == "decoder_mixer")
      c.decoder_mixer = v.as_string();
    else if (key == "decoder_mixer_options")
      c.decoder_mixer_options = options_from(v);
    else if (key == "cross")
      c.cross = v.as_string();
    else if (key == "dim")
      c.dim = v.as_int64();
    else if (key == "heads")
      c.heads = v.as_int64();
    else if (key == "layers")
      c.layers = v.as_int64();
    else if (key == "decoder_layers")
      c.decoder_layers = v.as_int64();
    else if (key == "ffn_dim")
      c.ffn_dim = v.as_int64();
    else if (key == "max_len")
      c.max_len = v.as_int64();
    else if (key == "tgt_max_len")
      c.tgt_max_len = v.as_int64();
    else if (key == "dropout")
      c.dropout = v.as_double();
    else if (key == "drop_path") {
      c.drop_path = v.as_double();
      check(c.drop_path >= 0 && c.drop_path < 1, "model config: drop_path ", c.drop_path,
            " is outside [0, 1)");
    } else if (key == "positions")
      c.positions = parse_position_kind(v.as_string());
    else if (key == "input")
      c.input = parse_input_kind(v.as_string());
    else if (key == "vocab")
      c.vocab = v.as_int64();
    else if (key == "classes")
      c.classes = v.as_int64();
    else if (key == "image_channels")
      c.image_channels = v.as_int64();
    else if (key == "image_height")
      c.image_height = v.as_int64();
    else if (key == "image_width")
      c.image_width = v.as_int64();
    else if (key == "patch")
      c.patch = v.as_int64();
    else if (key == "stem")
      c.stem = parse_image_stem(v.as_string());
    else if (key == "pool")
      c.pool = parse_pool_kind(v.as_string());
    else if (key == "tgt_vocab")
      c.tgt_vocab = v.as_int64();
    else if (key == "tie_output")
      c.tie_output = v.as_bool();
    else if (key == "seed")
      c.seed = static_cast<uint64_t>(v.as_int64());
    else
      fail("model config: unknown key '", key, "'");
  }
  return c;
}

std::string ModelConfig::str() const {
  std::ostringstream out;
  Json j = to_json();
  for (const auto& [k, v] : j.as_object()) out << "  " << k << " = " << v.dump() << "\n";
  return out.str();
}

}  // namespace mixlab
