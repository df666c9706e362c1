#include "train/run/checkpoint_names.h"

#include <cctype>

namespace mixlab {

namespace {

// "decoder.<digits>.rest" -> "decoder.layers.<digits>.rest"; "decoder_norm.rest" ->
// "decoder.final_norm.ln.rest" (that norm was always a LayerNorm).
std::string rename_model_key(const std::string& key) {
  const std::string old_norm = "decoder_norm.";
  if (key.starts_with(old_norm)) return "decoder.final_norm.ln." + key.substr(old_norm.size());
  const std::string decoder = "decoder.";
  if (!key.starts_with(decoder)) return key;
  size_t end = decoder.size();
  while (end < key.size() && std::isdigit(static_cast<unsigned char>(key[end]))) ++end;
  if (end == decoder.size() || end >= key.size() || key[end] != '.') return key;
  return "decoder.layers." + key.substr(decoder.size());
}

}  // namespace

std::string current_checkpoint_key(const std::string& key) {
  const std::string optimizer = "optimizer.";
  if (key.starts_with(optimizer)) return optimizer + rename_model_key(key.substr(optimizer.size()));
  return rename_model_key(key);
}

}  // namespace mixlab
