#include "nn/mixer_registry.h"

#include <set>

namespace mixlab {

void register_builtin_mixers(MixerRegistry& registry);  // nn/mixers/builtin.cpp

MixerRegistry& MixerRegistry::instance() {
  static MixerRegistry* registry = [] {
    auto* r = new MixerRegistry();
    register_builtin_mixers(*r);
    return r;
  }();
  return *registry;
}

void MixerRegistry::add(MixerInfo info) {
  check(!contains(info.name), "mixer '", info.name, "' registered twice");
  if (info.test_names.empty()) info.test_names.push_back(info.name);
  infos_.push_back(std::move(info));
}

bool MixerRegistry::contains(const std::string& name) const {
  for (const auto& i : infos_)
    if (i.name == name || (i.is_family && name.rfind(i.name + ":", 0) == 0)) return true;
  return false;
}

const MixerInfo& MixerRegistry::find(const std::string& name) const {
  for (const auto& i : infos_)
    if (i.name == name || (i.is_family && name.rfind(i.name + ":", 0) == 0)) return i;
  std::string known;
  for (const auto& i : infos_)
    known += (known.empty() ? "" : ", ") + i.name + (i.is_family ? ":…" : "");
  fail("unknown mixer '", name, "'; known mixers: ", known);
}

std::vector<std::string> MixerRegistry::causal_names() const {
  std::vector<std::string> out;
  for (const auto& i : infos_)
    if (i.capabilities.causal) out.push_back(i.name);
  return out;
}

std::shared_ptr<Mixer> MixerRegistry::build(const MixerConfig& config) const {
  const MixerInfo& info = find(config.name);
  std::set<std::string> allowed;
  for (const auto& o : info.options) allowed.insert(o.key);
  for (const auto& [key, value] : config.options) {
    if (allowed.count(key)) continue;
    std::string list;
    for (const auto& o : info.options) list += (list.empty() ? "" : ", ") + o.key;
    fail("mixer '", config.name, "' has no option '", key, "'",
         list.empty() ? std::string("; it takes no options") : "; its options: " + list);
  }
  if (config.causal && !info.capabilities.causal) {
    std::string names;
    for (const auto& n : causal_names()) names += (names.empty() ? "" : ", ") + n;
    fail("mixer '", config.name, "' cannot be causal: ", info.capabilities.causal_refusal,
         " Mixers that support causal use: ", names, ".");
  }
  if (config.cross && !info.capabilities.cross)
    fail("mixer '", config.name, "' cannot be a cross-mixer (keys and values from memory)");
  check(config.dim > 0 && config.heads > 0 && config.dim % config.heads == 0, config.name,
        ": width d = ", config.dim, " must be a positive multiple of heads h = ", config.heads);
  check(config.max_len > 0, config.name, ": max_len must be positive");
  return info.build(config);
}

}  // namespace mixlab
