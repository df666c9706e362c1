// The sequence every `mixlab TASK train` follows, written once for all tasks. A task supplies a
// job type with its own flags, data and model (apps/classify_train.cpp, apps/translate_train.cpp):
//
//   struct Job {
//     using Model = Classifier;                the model the task trains
//     static constexpr const char* kTask;      "classify": the command printed for the next steps
//     TrainCommandFlags flags;                 the flags every train command takes
//     void add_flags(CLI::App* cmd);           the task's own flags, after the shared ones
//     ModelConfig prepare();                   reads the data; the model's configuration
//     void adjust(TrainerOptions& options);    the task's part of the trainer's options
//     void describe(std::ostream&, const ModelConfig&, const Model&, Device);  data and model
//     std::string data_json() const;           the data description stored in the run
//     TaskType make_task(Model&, Device);      the training task (after the run folder opens)
//     const Dataset& train_set(); const Dataset* valid_set();
//     TrainingState metadata(const ModelConfig&);  stored in every checkpoint
//     std::map<std::string, double> test(TaskType&);  the test set's metrics (printed extras)
//     std::string title(const ModelConfig&);   the summary table's title
//     std::vector<std::string> next_commands(const std::string& mixlab, const std::string& best);
//   };
//
// The order matters: nothing is written before the data and model are built and checked;
// resume_schedule runs on every process before trainer_options reads the schedule (all ranks
// follow one schedule); only the primary process opens the run folder, scores the test set and
// prints.
#pragma once
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/cli_style.h"
#include "apps/common.h"
#include "apps/run_folder.h"
#include "train/distributed/distributed.h"

namespace mixlab::app {

// The flags every train command takes: --data, --seed, --out, ...; the model's; the trainer's.
struct TrainCommandFlags {
  CommonFlags common;
  ModelFlags model;
  TrainFlags train;
};

// setup_runtime and check_before_training: before anything is read or built.
Device start_training(const CLI::App& cmd, const TrainCommandFlags& f);
// resume_schedule, then trainer_options (which reads the schedule history it extends).
TrainerOptions training_options(CLI::App& cmd, TrainCommandFlags& f);
// The model's activations must fit a batch of --batch-size (a usage error naming the flag).
void check_batch_size_flag(const ModelConfig& config, int64_t batch_size);
// After Trainer::run(): an interrupted run prints how to resume it and throws Interrupted; a
// process other than the primary stops (nullopt); the primary loads best.safetensors into
// `model` when there is one and returns the step of the weights it will score.
std::optional<int64_t> finish_training(const TrainCommandFlags& f, const std::string& task,
                                       const TrainResult& result, Module& model);
// The folder, its files, and the next commands: the task's `uses`, then the same run with twice
// the epochs.
void print_train_next(const TrainCommandFlags& f, const std::string& task,
                      std::vector<std::string> uses);

template <typename Job>
void run_train_command(CLI::App& cmd, Job& job) {
  TrainCommandFlags& f = job.flags;
  const Device device = start_training(cmd, f);
  const ModelConfig config = job.prepare();
  TrainerOptions options = training_options(cmd, f);
  job.adjust(options);
  typename Job::Model model = build_model<typename Job::Model>(config);
  check_batch_size_flag(config, f.train.trainer.batch_size);
  model.to(device);
  job.describe(std::cerr, config, model, device);
  if (is_primary_process())  // [distributed] rank 0 alone owns the run folder
    open_run_folder(cmd, f.common, f.train, config, job.data_json());
  auto task = job.make_task(model, device);
  Trainer trainer(task, job.train_set(), job.valid_set(), options, job.metadata(config));
  const TrainResult result = trainer.run();
  const std::optional<int64_t> scored_step = finish_training(f, Job::kTask, result, model);
  if (!scored_step) return;
  const std::map<std::string, double> test = job.test(task);
  trainer.log_test(test, *scored_step);
  print_summary(job.title(config), model.parameter_count(), result, test);
  if (f.common.out.empty()) return;
  const std::string mixlab = shell_quote(program_path());
  const std::string best = shell_quote(Trainer::best_checkpoint(f.common.out));
  print_train_next(f, Job::kTask, job.next_commands(mixlab, best));
}

// Registers `train` under a task's command: the shared flags, the job's, and the sequence above.
template <typename Job>
void add_train_command(CLI::App& parent, const std::string& help) {
  auto job = std::make_shared<Job>();
  CLI::App* cmd = parent.add_subcommand("train", help);
  add_common_flags(cmd, job->flags.common);
  add_model_flags(cmd, job->flags.model);
  add_train_flags(cmd, job->flags.train);
  job->add_flags(cmd);
  cmd->callback([job, cmd] { run_train_command(*cmd, *job); });
}

}  // namespace mixlab::app
