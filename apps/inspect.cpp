// `mixlab inspect`: the flags of one inspection, handed to the lab (lab/inspect.h), which draws
// the mixing matrices.
#include <iostream>
#include <memory>

#include "apps/commands.h"
#include "apps/common.h"
#include "lab/inspect.h"

namespace mixlab::app {

void add_inspect_command(CLI::App& root) {
  auto o = std::make_shared<lab::InspectOptions>();
  auto common = std::make_shared<CommonFlags>();
  CLI::App* cmd = root.add_subcommand(
      "inspect",
      "the mixing matrices a trained model applies to one input: heatmaps, index.html and "
      "mixing.safetensors");
  cmd->add_option("--checkpoint", o->checkpoint, "a .safetensors checkpoint")->required();
  cmd->add_option("--input", o->input, "the input text (token classifiers and translators)");
  cmd->add_option("--target", o->target,
                  "translators: a target to teacher-force (default: the greedy translation)");
  cmd->add_option("--image", o->image, "image classifiers: index of a test image");
  cmd->add_option("--data", o->data, "image classifiers: fashion-mnist or a directory of IDX files")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "output directory")->required();
  add_runtime_flags(cmd, *common);  // --threads, --device, --padding
  cmd->callback([o, common] {
    o->device = setup_runtime(*common);
    lab::InspectResult r = lab::run_inspect(*o);
    std::cout << "answer: " << r.answer << "\n"
              << "wrote " << r.heatmaps.size() << " heatmaps, index.html and mixing.safetensors to "
              << o->out << "/\nopen: " << r.index_html << "\n";
  });
}

}  // namespace mixlab::app
