// Mixer names and options (`--mixer synth-mix:R+V --mixer-opt k=v`): the first line is the
// name, each further line one key=value. The options are checked by the command line's parser
// (apps/common.cpp) and the mixer is built small (d=8, h=2, l=8) by the registry; every input is
// built or refused with Error. Option values above 64 are skipped: huge sizes are refused by the
// command line's range checks, not by the builder.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "apps/common.h"
#include "core/error.h"
#include "nn/mixer_registry.h"

namespace {

bool has_number_above_64(const std::string& text) {
  long long value = 0;
  for (char c : text) {
    value = c >= '0' && c <= '9' ? std::min(value * 10 + (c - '0'), 1000LL) : 0;
    if (value > 64) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixlab;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string name, line;
  std::getline(in, name);
  std::vector<std::string> items;
  if (has_number_above_64(name)) return 0;
  while (std::getline(in, line)) {
    if (has_number_above_64(line)) return 0;
    items.push_back(line);
  }
  try {
    MixerConfig config;
    config.name = name;
    config.dim = 8;
    config.heads = 2;
    config.max_len = 8;
    config.causal = (size & 1) != 0;
    config.options = app::parse_mixer_options(name, items);
    make_mixer(config);
  } catch (const Error&) {
  }
  return 0;
}
