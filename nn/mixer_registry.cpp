#include "nn/mixer_registry.h"

#include <charconv>

#include "core/strings.h"
#include "core/suggest.h"

namespace mixlab {

void register_builtin_mixers(MixerRegistry& registry);  // nn/mixers/builtin.cpp

namespace {

bool parses_as_bool(const std::string& v) {
  // The spellings MixerConfig::get_bool accepts ("" is a bare flag: true).
  for (const char* word : {"1", "true", "yes", "on", "", "0", "false", "no", "off"})
    if (v == word) return true;
  return false;
}

// Refuses `value` for option `o` of mixer `config.name`, naming the allowed values.
void check_value(const MixerOption& o, const std::string& value, const MixerConfig& config,
                 bool sizes_known) {
  const std::string what = "mixer '" + config.name + "': option " + o.key + "=" + value;
  switch (o.type) {
    case MixerOption::Type::Boolean:
      if (!parses_as_bool(value)) spec_fail(what, " is not allowed; allowed: ", o.allowed());
      return;
    case MixerOption::Type::Integer:
      break;
  }
  for (const auto& word : o.words)
    if (value == word) return;
  int64_t number = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (ec != std::errc() || end != value.data() + value.size())
    spec_fail(what, " is not an integer; allowed: ", o.allowed());
  if (number < o.min || number > o.max) spec_fail(what, " is out of range; allowed: ", o.allowed());
  if (o.rule && sizes_known) {
    const std::string broken = o.rule(number, config);
    if (!broken.empty()) spec_fail(what, " is not allowed: ", broken);
  }
}

}  // namespace

MixerOption MixerOption::integer(std::string key, std::string default_value, std::string help,
                                 int64_t min, int64_t max, Rule rule,
                                 std::vector<std::string> words) {
  MixerOption o;
  o.key = std::move(key);
  o.default_value = std::move(default_value);
  o.help = std::move(help);
  o.type = Type::Integer;
  o.min = min;
  o.max = max;
  o.rule = std::move(rule);
  o.words = std::move(words);
  return o;
}

MixerOption MixerOption::boolean(std::string key, std::string default_value, std::string help) {
  MixerOption o;
  o.key = std::move(key);
  o.default_value = std::move(default_value);
  o.help = std::move(help);
  o.type = Type::Boolean;
  return o;
}

std::string MixerOption::allowed() const {
  switch (type) {
    case Type::Boolean:
      return "true or false";
    case Type::Integer:
      break;
  }
  std::string out = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  for (const auto& word : words) out += " or '" + word + "'";
  return out;
}

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

const MixerInfo* MixerRegistry::lookup(const std::string& name) const {
  for (const auto& i : infos_)
    if (i.name == name || (i.is_family && name.rfind(i.name + ":", 0) == 0)) return &i;
  return nullptr;
}

bool MixerRegistry::contains(const std::string& name) const { return lookup(name) != nullptr; }

const MixerInfo& MixerRegistry::find(const std::string& name) const {
  if (const MixerInfo* info = lookup(name)) return *info;
  // A family member with a misspelt family ("synth-mx:R+V") is matched on the family part.
  const size_t colon = name.find(':');
  std::vector<std::string> names, known;
  for (const auto& i : infos_) {
    if (colon == std::string::npos || i.is_family) names.push_back(i.name);
    known.push_back(i.name + (i.is_family ? ":…" : ""));
  }
  const auto match = closest_match(name.substr(0, colon), names);
  const std::string suggestion =
      match ? "; did you mean '" + *match + (colon == std::string::npos ? "" : name.substr(colon)) +
                  "'?"
            : "";
  spec_fail("unknown mixer '", name, "'", suggestion, " (known mixers: ", join(known), ")");
}

std::vector<std::string> MixerRegistry::causal_names() const {
  std::vector<std::string> out;
  for (const auto& i : infos_)
    if (i.capabilities.causal) out.push_back(i.name);
  return out;
}

void MixerRegistry::check_spec(const std::string& name,
                               const std::map<std::string, std::string>& options, bool causal,
                               bool cross) const {
  MixerConfig config;
  config.name = name;
  config.options = options;
  config.causal = causal;
  config.cross = cross;
  validate(config, false);
}

void MixerRegistry::validate(const MixerConfig& config, bool sizes_known) const {
  const MixerInfo& info = find(config.name);
  if (info.check_member) info.check_member(config.name);
  std::vector<std::string> keys;
  for (const auto& o : info.options) keys.push_back(o.key);
  for (const auto& [key, value] : config.options) {
    const MixerOption* option = nullptr;
    for (const auto& o : info.options)
      if (o.key == key) option = &o;
    if (!option)
      spec_fail("mixer '", config.name, "' has no option '", key, "'", did_you_mean(key, keys),
                keys.empty() ? std::string(" (it takes no options)")
                             : " (its options: " + join(keys) + ")");
    check_value(*option, value, config, sizes_known);
  }
  // As its options leave it (attention with lsa can be neither causal nor a cross-mixer).
  const MixerCapabilities caps = capabilities(config);
  if (config.causal && !caps.causal)
    spec_fail("mixer '", config.name, "' cannot be causal: ", caps.causal_refusal,
              " Mixers that support causal use: ", join(causal_names()), ".");
  if (config.cross && !caps.cross)
    spec_fail("mixer '", config.name, "' cannot be a cross-mixer (keys and values from memory): ",
              caps.cross_refusal.empty()
                  ? std::string("only dot-product attention can attend to the encoder")
                  : caps.cross_refusal);
  if (!sizes_known) return;
  if (!(config.dim > 0 && config.heads > 0 && config.dim % config.heads == 0))
    spec_fail(config.name, ": width d = ", config.dim,
              " must be a positive multiple of heads h = ", config.heads);
  if (config.max_len <= 0) spec_fail(config.name, ": max_len must be positive");
}

MixerCapabilities MixerRegistry::capabilities(const MixerConfig& config) const {
  const MixerInfo& info = find(config.name);
  MixerCapabilities caps = info.capabilities;
  if (info.adjust_capabilities) info.adjust_capabilities(config, caps);
  return caps;
}

std::shared_ptr<Mixer> MixerRegistry::build(const MixerConfig& config) const {
  validate(config);
  std::shared_ptr<Mixer> mixer = find(config.name).build(config);
  mixer->capabilities_ = capabilities(config);
  return mixer;
}

}  // namespace mixlab
