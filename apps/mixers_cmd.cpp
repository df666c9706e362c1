// `mixlab mixers`: the table of every registered mixer, read from the registry (never typed by
// hand): lengths it accepts, the padding and length-equivalence properties, causal use, its
// direction (left to right in every mode, or as the causal flag says), cross use, and its options
// with their defaults.
#include <iostream>

#include "apps/commands.h"
#include "backends/backend.h"
#include "nn/mixer_registry.h"
#include "train/run/summary.h"

namespace mixlab::app {

namespace {
std::string length_text(LengthSupport l) {
  switch (l) {
    case LengthSupport::Any:
      return "any N";
    case LengthSupport::UpToMaxLen:
      return "N <= max_len";
    case LengthSupport::PaddedToMaxLen:
      return "N <= max_len (padded inside)";
  }
  return "?";
}
}  // namespace

void add_mixers_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("mixers", "list every token mixer and what it supports");
  auto verbose = std::make_shared<bool>(false);
  cmd->add_flag("--verbose,-v", *verbose, "also print each mixer's summary and option help");
  cmd->callback([verbose] {
    std::vector<std::vector<std::string>> rows;
    for (const auto& info : MixerRegistry::instance().all()) {
      const MixerCapabilities& c = info.capabilities;
      std::string options;
      for (const auto& o : info.options)
        options += (options.empty() ? "" : " ") + o.key + "=" + o.default_value;
      rows.push_back({info.name + (info.is_family ? ":<C1+C2+...>" : ""), length_text(c.length),
                      c.padding_property ? "yes" : "no", c.exact_length_equivalence ? "yes" : "no",
                      c.causal ? "yes" : "refuse", c.left_to_right ? "left to right" : "by mode",
                      c.cross ? "yes" : "no", options.empty() ? "-" : options});
    }
    std::cout << format_table(
        {"mixer", "length", "padding", "exact length", "causal", "direction", "cross", "options"},
        rows);
    std::cout << "Every mixer runs on each device of this build (--device): " << built_devices()
              << " (ref: the reference kernels, plain loops).\n";
    if (*verbose)
      for (const auto& info : MixerRegistry::instance().all()) {
        std::cout << "\n" << info.name << ": " << info.summary << "\n";
        if (!info.capabilities.causal)
          std::cout << "  causal: refused. " << info.capabilities.causal_refusal << "\n";
        for (const auto& o : info.options)
          std::cout << "  --mixer-opt " << o.key << "=" << o.default_value << "  " << o.help
                    << "\n";
      }
  });
}

}  // namespace mixlab::app
