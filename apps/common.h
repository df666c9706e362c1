// What both apps share: the common flags, turning flags into a model config and trainer
// options, reading a checkpoint's saved configuration, and the end-of-run summary.
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "lab/errors.h"
#include "nn/model_config.h"
#include "train/loop/trainer.h"
#include "train/run/checkpoint_info.h"  // CheckpointInfo, read_checkpoint_info
#include "train/data/vocab.h"

namespace mixlab::app {

// The commands' usage errors (bad flag values, unknown mixer names; main() exits with code 2)
// and interruptions (Ctrl-C after the checkpoint was saved; 128 + the signal) are the lab's.
using lab::Interrupted;
using lab::UsageError;

struct CommonFlags {
  std::string data;  // NAME or PATH; empty = the command's built-in default
  std::string out = "";
  uint64_t seed = 0;
  int threads = 0;  // not given: MIXLAB_NUM_THREADS or all cores (--threads takes 1 or more)
  std::string device = "cpu";
  std::string padding = "auto";  // the models' PaddingRows: auto, skip or keep
};

struct ModelFlags {
  std::string mixer = "attention";
  std::vector<std::string> mixer_options;  // key=value
  int64_t dim = 64, heads = 4, layers = 2, ffn_dim = 0, max_len = 0;
  double dropout = 0.1;
  double drop_path = 0;
  std::string positions = "learned";
};

struct TrainFlags {
  TrainerOptions trainer;
  // Names on the command line and in config.ini; trainer_options() parses them into the enums.
  std::string optimizer = to_string(TrainerOptions().optimizer);
  std::string schedule = to_string(TrainerOptions().schedule);
  int64_t steps = 0;
  double label_smoothing = 0.0;
  int64_t train_limit = 0;  // use only the first N training examples (0 = all)
  bool overwrite = false;   // empty a --out that holds a run (apps/run_folder.h)
  // STEP:TOTAL:WARMUP of each earlier length of a resumed run (train/optim/schedule.h); written
  // by open_run_folder, read back from config.ini.
  std::vector<std::string> schedule_history;
};

// --help groups: Data, Model, Optimisation, Decoding, Output, Run.
extern const char* const kDataGroup;
extern const char* const kModelGroup;
extern const char* const kOptimisationGroup;
extern const char* const kDecodingGroup;
extern const char* const kOutputGroup;
extern const char* const kRunGroup;

// Training commands: --data, --seed, --out, --threads, --device.
void add_common_flags(CLI::App* cmd, CommonFlags& f);
// Inference commands take only what they use: --threads and --device ...
void add_runtime_flags(CLI::App* cmd, CommonFlags& f);
// ... and, when they read a data set, --data and --seed.
void add_data_flags(CLI::App* cmd, CommonFlags& f, const std::string& data_help);
void add_model_flags(CLI::App* cmd, ModelFlags& f);
void add_train_flags(CLI::App* cmd, TrainFlags& f);

// Throws Error when a write to stdout failed (a full disk, a closed pipe): output that cannot be
// written must not end in exit code 0.
void check_stdout();

// Outputs never alias inputs: a UsageError when `output` is the file `input` (the same file by
// device and inode, so links and other spellings count), naming the command and the flag.
void refuse_output_over_input(const std::string& output, const std::string& input,
                              const std::string& command, const std::string& flag,
                              const std::string& what);

// --threads' help (its range and default) and its check: 1 to kMaxThreads (core/parallel.h says
// why that ceiling), anything else a usage error naming the flag and the range.
std::string threads_flag_help();
CLI::Validator threads_validator();
// Applies --threads and --device; returns the device (a clear error when CUDA is absent).
Device setup_runtime(const CommonFlags& f);
// Where a run computes, for its first lines: "cuda:0", or "cpu, 2 threads" (the kernels' pool).
std::string describe_device(Device d);
// key=value list -> map, validated by the mixer registry (MixerSpecError: a usage error, exit 2).
std::map<std::string, std::string> parse_mixer_options(const std::string& mixer,
                                                       const std::vector<std::string>& items);
// Fills the shared part of a ModelConfig from the flags (mixer name checked).
void apply_model_flags(const ModelFlags& f, uint64_t seed, ModelConfig& config);
TrainerOptions trainer_options(const TrainFlags& f, const CommonFlags& c);

// Builds a model from flags: its errors (a mixer refusing an option value or a component name)
// are usage errors.
template <typename Model>
Model build_model(const ModelConfig& config) {
  try {
    return Model(config);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// Input tokens outside a vocabulary (they become <unk>), counted for one warning.
class UnknownTokens {
 public:
  void add(const std::vector<std::string>& tokens, const Vocab& vocab);
  int64_t total() const { return total_; }
  // "warning: 2 unknown tokens (fly, Walk) mapped to <unk>"; nothing when there were none.
  void report(std::ostream& out) const;

 private:
  int64_t total_ = 0;
  std::vector<std::string> names_;  // distinct, in order of appearance
};

// eval on data other than the checkpoint's: refused at the start (UsageError naming both data
// descriptions) when its tokenisation does not fit the checkpoint: a sequence longer than the
// model takes (`longest` > `max_len`), or most of its tokens (`unknown` of `tokens`) outside
// the checkpoint's vocabulary, which would be scored as <unk> and mean nothing.
void check_data_fits_checkpoint(const std::string& checkpoint, const std::string& trained_on,
                                const std::string& given, int64_t unknown, int64_t tokens,
                                int64_t longest, int64_t max_len);

// The end-of-run table: parameters, wall time, throughput and final metrics.
void print_summary(const std::string& title, int64_t parameters, const TrainResult& result,
                   const std::map<std::string, double>& test_metrics);

}  // namespace mixlab::app
