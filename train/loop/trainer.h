// The training loop shared by every app: batches from a seeded DataLoader through a task's
// loss, gradient accumulation and clipping, an optimizer and a learning-rate schedule;
// evaluation on the validation set every epoch; the best and the last checkpoints; metrics as
// CSV (and the curves, by a writer the caller gives); exact resume; Ctrl-C saves before exiting.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "train/run/checkpoint.h"
#include "train/optim/schedule.h"
#include "train/loop/tasks.h"

namespace mixlab {

// The optimizers the trainer builds; on command lines and in config.ini by their names.
enum class OptimizerKind { AdamW, Adam, Sgd };
std::string to_string(OptimizerKind kind);  // adamw | adam | sgd
OptimizerKind parse_optimizer_kind(std::string_view name);

struct TrainerOptions {
  int64_t epochs = 10;
  int64_t max_steps = 0;  // stop after this many optimizer steps (0: no limit)
  int64_t batch_size = 64;
  bool bucket_by_length = false;  // seq2seq: batches of similar lengths
  OptimizerKind optimizer = OptimizerKind::AdamW;
  double lr = 1e-3, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.98, eps = 1e-9, momentum = 0.9;
  ScheduleKind schedule = ScheduleKind::Cosine;
  int64_t warmup = 100;
  double min_lr = 0.0;
  double clip = 1.0;        // global gradient-norm clip (0: off)
  int64_t accumulate = 1;   // micro-batches per optimizer step
  std::string out_dir;      // checkpoints, metrics.csv, the curves ("" writes nothing)
  bool resume = false;      // continue from out_dir/last.safetensors
  uint64_t seed = 0;        // data order (dropout masks come from the default generator)
  int64_t log_every = 50;   // steps between train-loss rows in metrics.csv
  int64_t eval_every = 0;   // steps between evaluations (0: at the end of each epoch)
  int64_t keep_epochs = 0;  // also keep the last N end-of-epoch checkpoints (for averaging)
  int64_t prefetch = 2;     // batches prepared ahead by the loader's thread
  bool quiet = false;       // no progress output
  // Training stops (Error) when a step's loss exceeds this many times the first loss of the
  // run: a loss that explodes while staying finite is divergence too, and the checkpoints
  // already written (best.safetensors above all) are kept as they are.
  double max_loss_growth = 1e6;
  // Steps between reads of the training loss back to the host (0: every step on the CPU, where
  // a read costs nothing; every log_every steps on a GPU, where each read waits for the GPU to
  // finish the step: issue 14 wants none inside a step). The divergence checks above run on the
  // losses as they are read, in step order, and every checkpoint, evaluation and log row reads
  // first: on a GPU a diverged run is stopped up to this many steps late, naming the step whose
  // loss was bad, and no checkpoint holds a step after it. Distributed runs read every step (the
  // ranks agree on each micro-batch's loss).
  int64_t loss_read_every = 0;
  // Draws the curves from out_dir/metrics.csv after training and after the test rows, given
  // (out_dir, the task's primary metric or ""). The pictures live above the trainer
  // (lab/plot.h: lab::write_run_curves); empty draws none. Its errors are warnings.
  std::function<void(const std::string&, const std::string&)> draw_curves;
};

struct TrainResult {
  int64_t steps = 0;
  double seconds = 0, examples_per_second = 0, tokens_per_second = 0;
  double last_train_loss = 0;
  std::map<std::string, double> last_valid, best_valid;
  int64_t best_step = -1;
  bool interrupted = false;
};

class DataLoader;
class MetricsLog;
class Optimizer;
class ProgressBar;

// run() reads like llm.c's main loop:
//
//   start();                                  optimizer, schedule, resume, metrics log
//   for each epoch:
//     begin_epoch(epoch)
//     while (step(epoch)) { report; maybe evaluate_and_save() }   one optimizer update each
//     end_epoch(epoch)                        evaluate, save last (and epoch-E) checkpoints
//   finish()                                  throughput, curves
class DataParallel;  // train/distributed/distributed.h

class Trainer {
 public:
  // `metadata` (model config JSON, vocabularies) is stored in every checkpoint.
  Trainer(TrainTask& task, const Dataset& train, const Dataset* valid, TrainerOptions options,
          TrainingState metadata);
  ~Trainer();
  TrainResult run();
  // After run(): the test set's metrics as the last rows of metrics.csv/.jsonl (phase "test"),
  // and the curves redrawn with them.
  void log_test(const std::map<std::string, double>& metrics);

  static std::string last_checkpoint(const std::string& dir) { return dir + "/last.safetensors"; }
  static std::string best_checkpoint(const std::string& dir) { return dir + "/best.safetensors"; }
  static std::string metrics_csv(const std::string& dir) { return dir + "/metrics.csv"; }
  static std::string metrics_jsonl(const std::string& dir) { return dir + "/metrics.jsonl"; }
  static std::string epoch_checkpoint(const std::string& dir, int64_t epoch) {
    return dir + "/epoch-" + std::to_string(epoch) + ".safetensors";
  }

 private:
  void start();
  void begin_epoch(int64_t epoch);
  // One optimizer update over `accumulate` micro-batches; false (and no update) when the
  // epoch's batches are used up.
  bool step(int64_t epoch);
  void report_progress();
  // The divergence checks on one micro-batch's loss of step `step`: read at once, before the
  // update (read_at = 0), or read back at step `read_at`, after it. Throws Error when the run
  // diverged.
  void check_loss(double value, int64_t step, int64_t read_at);
  // A step's mean loss into the running mean shown and logged.
  void record_step_loss(double value);
  // Reads back the losses of the steps not read yet, checks and records them in order.
  void settle_losses();
  // Validation metrics into the log; a new best is saved as best.safetensors.
  void evaluate_and_save(int64_t epoch, int64_t position);
  // The last (and kept epoch-E) checkpoints at the end of an epoch or of the step budget.
  void end_epoch(int64_t epoch);
  TrainResult finish();
  void save(const std::string& path, int64_t epoch, int64_t position);
  // metrics.csv (appending under its header) with metrics.jsonl beside it.
  std::unique_ptr<MetricsLog> open_metrics_log() const;
  double seconds_since_start() const;

  TrainTask& task_;
  const Dataset& train_;
  const Dataset* valid_;
  TrainerOptions options_;
  TrainingState metadata_;

  // The state of one run() call.
  std::unique_ptr<DataLoader> loader_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<MetricsLog> log_;
  std::unique_ptr<ProgressBar> bar_;
  TrainingState state_;
  TrainResult result_;
  bool files_ = false;
  bool quiet_ = false;          // options_.quiet, or a rank other than 0
  DataParallel* dp_ = nullptr;  // [distributed] the run's communicator (lives in run())
  int64_t steps_per_epoch_ = 0, start_epoch_ = 0, skip_ = 0;
  int64_t total_steps_ = 0, start_step_ = 0;  // for the whole run's ETA
  int64_t epoch_ = 0;                         // the epoch in progress (0-based; logged 1-based)
  int64_t epoch_step_ = 0;                    // optimizer updates of the current epoch
  bool epoch_done_ = false;  // the loader ran out of batches (vs. a stop mid-epoch)
  bool stop_ = false;
  double best_ = -1e300;     // the best primary metric so far
  double running_loss_ = 0;  // the epoch's train loss sum, for the mean shown
  int64_t running_n_ = 0;
  double last_lr_ = 0;
  double first_loss_ = 0;    // the first micro-batch loss of this run() (for max_loss_growth)
  double eval_seconds_ = 0;  // excluded from the training throughput
  int64_t read_every_ = 1;   // options_.loss_read_every as it applies to this run
  struct UnreadStep {
    int64_t step;
    std::vector<Tensor> losses;  // its micro-batches' losses, on the model's device
    int64_t micro_batches;
  };
  std::vector<UnreadStep> unread_;  // steps whose losses have not been read back yet
  int64_t examples_ = 0, tokens_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace mixlab
