#include "train/run/checkpoint_names.h"

#include <cctype>

namespace mixlab {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// "decoder.<digits>.rest" -> "decoder.layers.<digits>.rest"; "decoder_norm.rest" ->
// "decoder.final_norm.ln.rest" (that norm was always a LayerNorm).
std::string rename_model_key(const std::string& key) {
  const std::string old_norm = "decoder_norm.";
  if (starts_with(key, old_norm)) return "decoder.final_norm.ln." + key.substr(old_norm.size());
  const std::string decoder = "decoder.";
  if (!starts_with(key, decoder)) return key;
  size_t end = decoder.size();
  while (end < key.size() && std::isdigit(static_cast<unsigned char>(key[end]))) ++end;
  if (end == decoder.size() || end >= key.size() || key[end] != '.') return key;
  return "decoder.layers." + key.substr(decoder.size());
}

}  // namespace

std::string current_checkpoint_key(const std::string& key) {
  const std::string optimizer = "optimizer.";
  if (starts_with(key, optimizer))
    return optimizer + rename_model_key(key.substr(optimizer.size()));
  return rename_model_key(key);
}

}  // namespace mixlab
