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

#include "train/data/augment.h"
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
  // The run's earlier schedule lengths when it was resumed with another --steps or --epochs
  // (ScheduleOptions::earlier, the rule in train/optim/schedule.h).
  std::vector<ScheduleSegment> schedule_history;
  double clip = 1.0;        // global gradient-norm clip (0: off)
  int64_t accumulate = 1;   // micro-batches per optimizer step
  std::string out_dir;      // checkpoints, metrics.csv, the curves ("" writes nothing)
  bool resume = false;      // continue from out_dir/last.safetensors
  uint64_t seed = 0;        // data order (dropout masks come from the default generator)
  int64_t log_every = 50;   // steps between train rows in metrics.csv (the log window)
  int64_t eval_every = 0;   // steps between evaluations (0: at the end of each epoch)
  int64_t keep_epochs = 0;  // also keep the last N end-of-epoch checkpoints (for averaging)
  int64_t prefetch = 2;     // batches prepared ahead by the loader's thread
  bool quiet = false;       // no progress output
  // Training images only (train/data/augment.h); off by default.
  ImageAugmentation augment;
  // Training stops (Error) when a step's loss, or a validation loss, exceeds this many times the
  // first loss of the run: a loss that explodes while staying finite is divergence too, and the
  // checkpoints already written (best.safetensors above all) are kept as they are. A validation
  // loss that is not finite, or weights that are not, stop it the same way: no such model is
  // ever saved as best.
  double max_loss_growth = 1e6;
  // Steps between reads of the training loss back to the host (0: every step on the CPU, where
  // a read costs nothing; every log_every steps on a GPU, where each read waits for the GPU to
  // finish the step: a step should make none). The divergence checks above run on the
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

// The column of metrics.csv (and key of metrics.jsonl) that holds a train row's loss: the mean
// of the step losses since the previous train row (the log window: log_every steps, fewer in
// the last window of a run and in the first after a resume).
inline constexpr const char* kTrainLossColumn = "train_loss_window";

struct TrainResult {
  int64_t steps = 0;
  double seconds = 0, examples_per_second = 0, tokens_per_second = 0;
  double last_train_loss = 0;  // the last log window's mean: metrics.csv's last train row
  std::map<std::string, double> last_valid, best_valid;
  // best.safetensors: the step it holds (-1: none) and the metric that chose it. Ties in the
  // metric go to the lower validation loss, then to the later step.
  int64_t best_step = -1;
  std::string best_metric;
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
  // logged at `model_step`, the step of the model that was scored (best.safetensors' step when
  // the caller scored that), and the curves redrawn with them.
  void log_test(const std::map<std::string, double>& metrics, int64_t model_step);

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
  // A step's mean loss into the epoch's running mean (shown) and the log window (logged).
  void record_step_loss(double value);
  // The log window's mean as a train row of metrics.csv; the window starts again.
  void log_train_window();
  // Throws Error when a validation loss or the weights show that the run diverged.
  void check_validation(double valid_loss);
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
  double best_loss_ = 0;     // the validation loss of that model (the tie-breaker)
  int64_t best_step_ = -1;   // its step (-1: no best yet)
  double running_loss_ = 0;  // the epoch's train loss sum, for the mean shown
  int64_t running_n_ = 0;
  double window_loss_ = 0;  // the step losses since the last train row, for the next one
  int64_t window_n_ = 0;
  double last_lr_ = 0;
  double first_loss_ = 0;        // the first micro-batch loss of this run() (for max_loss_growth)
  double first_weight_rms_ = 0;  // the parameters' root mean square when this run() started
  double eval_seconds_ = 0;      // excluded from the training throughput
  int64_t read_every_ = 1;       // options_.loss_read_every as it applies to this run
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
