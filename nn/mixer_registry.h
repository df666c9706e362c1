// The registry of mixers, the one owner of mixer names and options: it validates a mixer's name,
// options and use (causal, cross) once, builds it and hands it its capabilities; it reports what
// each one supports (the table of §13 that `mixlab mixers` prints), and is what the shared mixer
// tests iterate over, so a new mixer is covered by registering it.
#pragma once
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/mixer.h"

namespace mixlab {

// Every refusal of a mixer specification: an unknown name or option (with the closest match
// suggested), an option value outside its range, a use the mixer does not support (causal,
// cross), inconsistent sizes. Apps report it as a usage error (exit 2).
class MixerSpecError : public Error {
 public:
  using Error::Error;
};

// Builds the message from its pieces and throws MixerSpecError (like fail() for Error).
template <typename... Parts>
[[noreturn]] void spec_fail(const Parts&... parts) {
  std::ostringstream out;
  detail::append_all(out, parts...);
  throw MixerSpecError(out.str());
}

// One option a mixer takes. The registry checks a given value against it before the mixer is
// built, so a mixer's constructor reads options that are already valid.
struct MixerOption {
  enum class Type { Integer, Boolean };
  std::string key;            // e.g. "rank"
  std::string default_value;  // as text, e.g. "8"
  std::string help;
  Type type = Type::Integer;
  // Integer: the allowed range. The caps sit far above any published setting; they keep a typo
  // (kernel=100001) from allocating gigabytes.
  int64_t min = 0;
  int64_t max = std::numeric_limits<int64_t>::max();
  std::vector<std::string> words;  // Integer: words allowed instead of a number, e.g. "auto"
  // Integer only: a further rule given the whole configuration; returns "" when
  // `value` is allowed, else what is required ("kernel width K must be odd ...").
  using Rule = std::function<std::string(int64_t value, const MixerConfig&)>;
  Rule rule;

  // An integer option in [min, max] (and `rule`, when given), or one of `words`.
  static MixerOption integer(std::string key, std::string default_value, std::string help,
                             int64_t min, int64_t max, Rule rule = nullptr,
                             std::vector<std::string> words = {});
  // A boolean option. What it takes away goes through MixerInfo::adjust_capabilities.
  static MixerOption boolean(std::string key, std::string default_value, std::string help);

  std::string allowed() const;  // "an integer in [1, 255]", "true or false", ...
};

// The cap of size options (hidden widths, ranks, memory slots, projected lengths): far above any
// published setting, low enough that a typo cannot ask for terabytes.
inline constexpr int64_t kMaxOptionSize = 65536;

struct MixerInfo {
  std::string name;  // "attention"; a family like "synth-mix" takes ":components" after it
  bool is_family = false;
  // Family only: refuses a malformed member name ("synth-mix:R+X") with MixerSpecError.
  std::function<void(const std::string& member)> check_member;
  std::string summary;  // one line: what it computes
  MixerCapabilities capabilities;
  // Options that change what an instance supports (fnet-padded gives up exact padding).
  std::function<void(const MixerConfig&, MixerCapabilities&)> adjust_capabilities;
  std::vector<MixerOption> options;
  std::function<std::shared_ptr<Mixer>(const MixerConfig&)> build;
  // The spec's trainable parameter count for a configuration (tests compare it).
  std::function<int64_t(const MixerConfig&)> expected_parameters;
  // Concrete names the shared tests instantiate (a family lists some members).
  std::vector<std::string> test_names;
  // Option sets the shared mixer tests also run, each with the first test name: the options
  // that change what the mixer computes (a relative position bias, a kernel width), so each
  // is held to every property the default configuration is.
  std::vector<std::map<std::string, std::string>> test_options;
};

class MixerRegistry {
 public:
  static MixerRegistry& instance();  // with every built-in mixer registered
  void add(MixerInfo info);
  // The entry for a name ("synth-mix:R+V" finds the "synth-mix" family); an unknown name is a
  // MixerSpecError suggesting the closest known name and listing every known mixer.
  const MixerInfo& find(const std::string& name) const;
  bool contains(const std::string& name) const;
  const std::vector<MixerInfo>& all() const { return infos_; }
  std::vector<std::string> causal_names() const;  // mixers that support causal use

  // Checks everything about a configuration without building: the name (a family's member
  // too), option keys (suggesting the closest) and values (naming the allowed range), the
  // causal and cross flags (a refusal names the mixer, says why and lists the mixers that can),
  // and the sizes. Throws MixerSpecError.
  void validate(const MixerConfig& config) const { validate(config, true); }
  // What a person types, checked before the sizes are known (apps call it while parsing flags,
  // before reading any data): validate() without the sizes and the option rules that need them.
  void check_spec(const std::string& name, const std::map<std::string, std::string>& options,
                  bool causal, bool cross) const;
  // The capabilities of an instance built with `config` (the entry's, adjusted by its options).
  MixerCapabilities capabilities(const MixerConfig& config) const;
  // validate(), then build, handing the mixer its capabilities.
  std::shared_ptr<Mixer> build(const MixerConfig& config) const;

 private:
  const MixerInfo* lookup(const std::string& name) const;
  void validate(const MixerConfig& config, bool sizes_known) const;
  std::vector<MixerInfo> infos_;
};

inline std::shared_ptr<Mixer> make_mixer(const MixerConfig& config) {
  return MixerRegistry::instance().build(config);
}

}  // namespace mixlab
