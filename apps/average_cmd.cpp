// `mixlab average --out AVG.safetensors C1 C2 ...`: checkpoint averaging. The mean of the last
// few end-of-epoch checkpoints (train with --keep-epochs N) is usually a better model than any
// one of them; the result is a weights file that `eval`, `run` and `predict` take like any
// checkpoint. All inputs are checked before anything is written (train/run/checkpoint.h): one
// model configuration, vocabularies and label names, the same tensors with the same shapes; the
// output is never one of the inputs.
#include <iostream>

#include "apps/commands.h"
#include "apps/cli_style.h"
#include "apps/common.h"
#include "train/run/checkpoint.h"
#include "train/run/progress.h"

namespace mixlab::app {

void add_average_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "average", "average the weights of checkpoints of one model (e.g. the last epochs)");
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("--out", *output, "the averaged weights file to write")->required();
  cmd->add_option("checkpoints", *inputs, "two or more .safetensors checkpoints of one model")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->callback([inputs, output] {
    if (inputs->size() < 2)
      throw UsageError("average: give at least two checkpoints (got " +
                       std::to_string(inputs->size()) + ")");
    // The output must not be one of the inputs (compared as files, so a second name of one
    // file, a hard or symbolic link, counts): writing it would destroy a training checkpoint.
    for (const auto& input : *inputs)
      refuse_output_over_input(*output, input, "average", "--out", "an input checkpoint");
    {
      // Shown once reading the inputs takes more than a second (a plain line when not a TTY).
      ProgressBar bar("average", static_cast<int64_t>(inputs->size()));
      average_checkpoints(*inputs, *output,
                          [&](size_t read) { bar.update(static_cast<int64_t>(read)); });
      bar.finish();
    }
    std::cout << "averaged " << inputs->size() << " checkpoints into " << *output << "\n";
    // Which command takes it depends on the model the checkpoints hold.
    const ModelTask task = read_checkpoint_info(*output).config.task;
    const std::string mixlab = shell_quote(program_path()), avg = shell_quote(*output);
    print_where_and_next(
        std::cout, "",
        {task == ModelTask::Translate ? mixlab + " translate eval --checkpoint " + avg + " --beam 4"
                                      : mixlab + " classify eval --checkpoint " + avg});
  });
}

}  // namespace mixlab::app
