// The registry of mixers: builds any mixer by name with its options, reports what each one
// supports (the table of §13 that `mixlab mixers` prints), and is what the shared mixer tests
// iterate over, so a new mixer is covered by registering it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/mixer.h"

namespace mixlab {

struct MixerOption {
  std::string key;            // e.g. "rank"
  std::string default_value;  // as text, e.g. "8"
  std::string help;
};

struct MixerInfo {
  std::string name;  // "attention"; a family like "synth-mix" takes ":components" after it
  bool is_family = false;
  std::string summary;  // one line: what it computes
  MixerCapabilities capabilities;
  std::vector<MixerOption> options;
  std::function<std::shared_ptr<Mixer>(const MixerConfig&)> build;
  // The spec's trainable parameter count for a configuration (tests compare it).
  std::function<int64_t(const MixerConfig&)> expected_parameters;
  // Concrete names the shared tests instantiate (a family lists some members).
  std::vector<std::string> test_names;
};

class MixerRegistry {
 public:
  static MixerRegistry& instance();  // with every built-in mixer registered
  void add(MixerInfo info);
  // The entry for a name ("synth-mix:R+V" finds the "synth-mix" family); unknown names are an
  // Error listing every known mixer.
  const MixerInfo& find(const std::string& name) const;
  bool contains(const std::string& name) const;
  const std::vector<MixerInfo>& all() const { return infos_; }
  std::vector<std::string> causal_names() const;  // mixers that support causal use

  // Validates options and the causal flag (a refusal names the mixer, says why and lists the
  // causal-capable mixers), then builds.
  std::shared_ptr<Mixer> build(const MixerConfig& config) const;

 private:
  std::vector<MixerInfo> infos_;
};

inline std::shared_ptr<Mixer> make_mixer(const MixerConfig& config) {
  return MixerRegistry::instance().build(config);
}

}  // namespace mixlab
