// `mixlab export --checkpoint CK --out FILE [--dtype f32|f16]`: the weights of a checkpoint
// without its optimizer state (a third of a training checkpoint's size; f16 halves it again),
// with the model configuration and vocabularies as metadata, so that `translate eval|run`,
// `classify eval|predict` and `average` take it like any checkpoint, and other tools (PyTorch,
// see docs/interop.md and scripts/torch_interop.py) can read it as a plain safetensors file.
#include <filesystem>
#include <iostream>

#include "apps/commands.h"
#include "apps/common.h"
#include "nn/models.h"
#include "train/run/checkpoint.h"

namespace mixlab::app {

namespace {

// Before anything is written: the checkpoint must load into the model its configuration
// describes (the configuration parses, every tensor is there with the model's shape and dtype,
// nothing extra), so an export is never a file that fails only when used.
void check_usable_checkpoint(const std::string& path) {
  try {
    const CheckpointInfo info = read_checkpoint_info(path);
    if (info.config.task == ModelTask::Translate) {
      Translator model(info.config);
      load_weights(path, model);
    } else {
      Classifier model(info.config);
      load_weights(path, model);
    }
  } catch (const std::exception& e) {
    fail("export: ", path,
         " is not a checkpoint a model can use, so nothing was written: ", e.what());
  }
}

}  // namespace

void add_export_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "export", "write a checkpoint's weights only (optionally float16) for inference and interop");
  struct Flags {
    std::string checkpoint, out, dtype = "f32";
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--checkpoint", f->checkpoint, "the checkpoint (or weights file) to export")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", f->out, "the weights file to write (.safetensors)")->required();
  cmd->add_option("--dtype", f->dtype,
                  "f32: the weights as trained; f16: IEEE half, half the size (loaded back as f32)")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
  cmd->callback([f] {
    namespace fs = std::filesystem;
    refuse_output_over_input(f->out, f->checkpoint, "export", "--out", "the --checkpoint");
    check_usable_checkpoint(f->checkpoint);
    export_weights(f->checkpoint, f->out, f->dtype == "f16" ? ExportDType::F16 : ExportDType::F32);
    const auto in = fs::file_size(f->checkpoint), out = fs::file_size(f->out);
    std::cout << "exported " << f->checkpoint << " (" << in << " bytes) to " << f->out << " ("
              << out << " bytes, " << f->dtype << ", " << (100 * out + in / 2) / in
              << "% of the input)\n";
  });
}

}  // namespace mixlab::app
