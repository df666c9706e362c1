// What both apps share: the common flags, turning flags into a model config and trainer
// options, reading a checkpoint's saved configuration, and the end-of-run summary.
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "nn/model_config.h"
#include "train/trainer.h"

namespace mixlab::app {

// A usage error: bad flag values, unknown mixer names. main() exits with code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Training stopped by Ctrl-C after its checkpoint was saved. main() exits with code 130.
class Interrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted"; }
};

struct CommonFlags {
  std::string data;  // NAME or PATH; empty = the command's built-in default
  std::string out = "";
  uint64_t seed = 0;
  int threads = 0;  // 0 = MIXLAB_NUM_THREADS or all cores
  std::string device = "cpu";
};

struct ModelFlags {
  std::string mixer = "attention";
  std::vector<std::string> mixer_options;  // key=value
  int64_t dim = 64, heads = 4, layers = 2, ffn_dim = 0, max_len = 0;
  double dropout = 0.1;
  std::string positions = "learned";
};

struct TrainFlags {
  TrainerOptions trainer;
  int64_t steps = 0;
  double label_smoothing = 0.0;
  int64_t train_limit = 0;  // use only the first N training examples (0 = all)
};

void add_common_flags(CLI::App* cmd, CommonFlags& f);
void add_model_flags(CLI::App* cmd, ModelFlags& f);
void add_train_flags(CLI::App* cmd, TrainFlags& f);

// Applies --threads and --device; returns the device (a clear error when CUDA is absent).
Device setup_runtime(const CommonFlags& f);
// key=value list -> map, validated by the mixer registry (MixerSpecError: a usage error, exit 2).
std::map<std::string, std::string> parse_mixer_options(const std::string& mixer,
                                                       const std::vector<std::string>& items);
// Fills the shared part of a ModelConfig from the flags (mixer name checked).
void apply_model_flags(const ModelFlags& f, uint64_t seed, ModelConfig& config);
TrainerOptions trainer_options(const TrainFlags& f, const CommonFlags& c);

// The configuration a checkpoint was trained with.
struct CheckpointInfo {
  ModelConfig config;
  std::string vocab_src, vocab_tgt;
  std::map<std::string, std::string> extra;
};
CheckpointInfo read_checkpoint_info(const std::string& path);

// Writes the exact command-line configuration (INI, readable by --config) and the model JSON.
void save_run_config(const CLI::App& cmd, const ModelConfig& config, const std::string& dir);

// The end-of-run table: parameters, wall time, throughput and final metrics.
void print_summary(const std::string& title, int64_t parameters, const TrainResult& result,
                   const std::map<std::string, double>& test_metrics);

}  // namespace mixlab::app
