#include "train/run/checkpoint_info.h"

#include <charconv>
#include <filesystem>

#include "io/json.h"
#include "io/safetensors.h"

namespace mixlab {

CheckpointInfo read_checkpoint_info(const std::string& path) {
  check(std::filesystem::exists(path), "checkpoint '", path, "' does not exist");
  SafetensorsFile file = load_safetensors(path);
  CheckpointInfo info;
  auto get = [&](const char* key) {
    auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string() : it->second;
  };
  std::string config = get("config");
  check(!config.empty(), "checkpoint '", path, "' holds no model configuration");
  info.config = ModelConfig::from_json(Json::parse(config));
  for (auto [key, field] : {std::pair{"step", &info.step}, std::pair{"epoch", &info.epoch}}) {
    const std::string text = get(key);
    int64_t v = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (!text.empty() && error == std::errc() && end == text.data() + text.size()) *field = v;
  }
  info.vocab_src = get("vocab_src");
  info.vocab_tgt = get("vocab_tgt");
  std::string extra = get("extra");
  if (!extra.empty()) {
    Json parsed = Json::parse(extra);  // named: a loop over a temporary's member would dangle
    for (const auto& [k, v] : parsed.as_object()) info.extra[k] = v.as_string();
  }
  return info;
}

}  // namespace mixlab
