// The training loop shared by every app: batches from a seeded DataLoader through a task's
// loss, gradient accumulation and clipping, an optimizer and a learning-rate schedule;
// evaluation on the validation set every epoch; the best and the last checkpoints; metrics as
// CSV and a PNG of the curves; exact resume; Ctrl-C saves before exiting.
#pragma once
#include <map>
#include <string>

#include "train/checkpoint.h"
#include "train/tasks.h"

namespace mixlab {

struct TrainerOptions {
  int64_t epochs = 10;
  int64_t max_steps = 0;  // stop after this many optimizer steps (0: no limit)
  int64_t batch_size = 64;
  bool bucket_by_length = false;    // seq2seq: batches of similar lengths
  std::string optimizer = "adamw";  // adamw | adam | sgd
  double lr = 1e-3, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.98, eps = 1e-9, momentum = 0.9;
  std::string schedule = "cosine";  // constant | cosine | inverse_sqrt | step
  int64_t warmup = 100;
  double min_lr = 0.0;
  double clip = 1.0;        // global gradient-norm clip (0: off)
  int64_t accumulate = 1;   // micro-batches per optimizer step
  std::string out_dir;      // checkpoints, metrics.csv, curves.png ("" writes nothing)
  bool resume = false;      // continue from out_dir/last.safetensors
  uint64_t seed = 0;        // data order (dropout masks come from the default generator)
  int64_t log_every = 50;   // steps between train-loss rows in metrics.csv
  int64_t eval_every = 0;   // steps between evaluations (0: at the end of each epoch)
  int64_t keep_epochs = 0;  // also keep the last N end-of-epoch checkpoints (for averaging)
  int64_t prefetch = 2;     // batches prepared ahead by the loader's thread
  bool quiet = false;       // no progress output
};

struct TrainResult {
  int64_t steps = 0;
  double seconds = 0, examples_per_second = 0, tokens_per_second = 0;
  double last_train_loss = 0;
  std::map<std::string, double> last_valid, best_valid;
  int64_t best_step = -1;
  bool interrupted = false;
};

class Trainer {
 public:
  // `metadata` (model config JSON, vocabularies) is stored in every checkpoint.
  Trainer(TrainTask& task, const Dataset& train, const Dataset* valid, TrainerOptions options,
          TrainingState metadata);
  TrainResult run();

  static std::string last_checkpoint(const std::string& dir) { return dir + "/last.safetensors"; }
  static std::string best_checkpoint(const std::string& dir) { return dir + "/best.safetensors"; }
  static std::string epoch_checkpoint(const std::string& dir, int64_t epoch) {
    return dir + "/epoch-" + std::to_string(epoch) + ".safetensors";
  }

 private:
  TrainTask& task_;
  const Dataset& train_;
  const Dataset* valid_;
  TrainerOptions options_;
  TrainingState metadata_;
};

}  // namespace mixlab
