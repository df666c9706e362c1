#include "apps/train_command.h"

#include <filesystem>

#include "nn/model_size.h"
#include "train/run/checkpoint.h"

namespace mixlab::app {

Device start_training(const CLI::App& cmd, const TrainCommandFlags& f) {
  const Device device = setup_runtime(f.common);
  check_before_training(cmd, f.common, f.train);
  return device;
}

TrainerOptions training_options(CLI::App& cmd, TrainCommandFlags& f) {
  resume_schedule(cmd, f.common, f.train);
  return trainer_options(f.train, f.common);
}

void check_batch_size_flag(const ModelConfig& config, int64_t batch_size) {
  try {
    check_batch_size(config, batch_size);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

std::optional<int64_t> finish_training(const TrainCommandFlags& f, const std::string& task,
                                       const TrainResult& result, Module& model) {
  const std::string& out = f.common.out;
  if (result.interrupted) {
    print_where_and_next(
        std::cerr, out,
        {shell_quote(program_path()) + " " + task + " train --resume --out " + shell_quote(out)});
    throw Interrupted();
  }
  if (!is_primary_process()) return std::nullopt;  // [distributed] ranks > 0 stop after training
  int64_t scored_step = result.steps;  // the test row names the step of the model it scored
  if (!out.empty() && std::filesystem::exists(Trainer::best_checkpoint(out))) {
    load_weights(Trainer::best_checkpoint(out), model);
    if (result.best_step >= 0) scored_step = result.best_step;
  }
  return scored_step;
}

void print_train_next(const TrainCommandFlags& f, const std::string& task,
                      std::vector<std::string> uses) {
  const std::string& out = f.common.out;
  uses.push_back(shell_quote(program_path()) + " --config " + shell_quote(out + "/config.ini") +
                 " " + task + " train --epochs " + std::to_string(f.train.trainer.epochs * 2) +
                 " --out " + shell_quote(out + "-longer") +
                 "   # the same run with twice the epochs, anew");
  print_where_and_next(std::cout, out, uses);
}

}  // namespace mixlab::app
