#include "apps/common.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/parallel.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "train/data/text_files.h"
#include "lab/plot.h"
#include "train/run/summary.h"

namespace mixlab::app {

// The groups of --help (and of config.ini), in the order a reader looks for them.
const char* const kDataGroup = "Data";
const char* const kModelGroup = "Model";
const char* const kOptimisationGroup = "Optimisation";
const char* const kDecodingGroup = "Decoding";
const char* const kOutputGroup = "Output";
const char* const kRunGroup = "Run";

namespace {

CLI::Validator device_name() {
  return CLI::Validator(
      [](std::string& name) {
        try {
          parse_device(name);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      },
      "cpu|ref|cuda|cuda:N");
}

// CLI11's NonNegativeNumber prints DBL_MAX in its message; this one says what is wrong.
CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& text) {
        double v = 0;
        auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || p != text.data() + text.size())
          return "'" + text + "' is not a number";
        return v < 0 ? text + " is negative; expected 0 or more" : std::string();
      },
      "NONNEGATIVE");
}

}  // namespace

void add_runtime_flags(CLI::App* cmd, CommonFlags& f) {
  // Not given, it is not written to config.ini (no default string, no callback for a default):
  // a run that did not choose keeps MIXLAB_NUM_THREADS or the cores of whichever machine
  // replays or resumes it.
  cmd->add_option("--threads", f.threads, threads_flag_help())
      ->run_callback_for_default(false)
      ->check(threads_validator())
      ->group(kRunGroup);
  cmd->add_option("--device", f.device,
                  "cpu, cuda or cuda:N; ref: the reference kernels (plain loops, slow and exact)")
      ->capture_default_str()
      ->check(device_name())
      ->group(kRunGroup);
  cmd->add_option("--padding", f.padding,
                  "run the blocks on the real tokens alone (skip) or on the padded batch (keep); "
                  "auto: skip on the CPU, keep on a GPU. The same model either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "skip", "keep"}))
      ->group(kRunGroup);
}

void add_data_flags(CLI::App* cmd, CommonFlags& f, const std::string& data_help) {
  cmd->add_option("--data", f.data, data_help)->group(kDataGroup);
  cmd->add_option("--seed", f.seed, "seed for initialisation, data order, held-out sets, dropout")
      ->capture_default_str()
      ->group(kRunGroup);
}

void add_common_flags(CLI::App* cmd, CommonFlags& f) {
  add_data_flags(cmd, f, "data set name or path (default: the command's built-in set)");
  cmd->add_option("--out", f.out, "the run folder: checkpoints, metrics, plots and config")
      ->capture_default_str()
      ->group(kOutputGroup);
  add_runtime_flags(cmd, f);
}

void add_model_flags(CLI::App* cmd, ModelFlags& f) {
  auto model = [&](CLI::Option* o) { return o->capture_default_str()->group(kModelGroup); };
  model(cmd->add_option("--mixer", f.mixer, "token mixer (see `mixlab mixers`)"));
  cmd->add_option("--mixer-opt", f.mixer_options,
                  "a mixer option key=value (repeatable), e.g. --mixer-opt rank=4")
      ->group(kModelGroup);
  model(cmd->add_option("--dim", f.dim, "model width d"))->check(CLI::Range(1, 65536));
  model(cmd->add_option("--heads", f.heads, "heads h"))->check(CLI::Range(1, 1024));
  model(cmd->add_option("--layers", f.layers, "encoder (and decoder) blocks"))
      ->check(CLI::Range(1, 256));
  model(cmd->add_option("--ffn-dim", f.ffn_dim, "FFN hidden width f (0: 4d)"))
      ->check(CLI::Range(0, 1 << 20));
  model(cmd->add_option("--max-len", f.max_len,
                        "max length ℓ: at least the longest sequence in the data, which may have "
                        "at most max(" +
                            std::to_string(kDataLengthCap) +
                            ", --max-len) tokens (0: the data's longest)"))
      ->check(CLI::Range(0, 1 << 20));
  model(cmd->add_option("--dropout", f.dropout, "residual dropout rate"))
      ->check(CLI::Range(0.0, 0.99));
  model(cmd->add_option("--drop-path", f.drop_path,
                        "stochastic depth: the deepest block's rate of dropping a sequence's "
                        "residual branches (block l of L: rate·l/L; 0: off)"))
      ->check(CLI::Range(0.0, 0.99));
  model(cmd->add_option("--pos", f.positions, "positional embedding"))
      ->check(CLI::IsMember({"learned", "sinusoidal", "none"}));
}

void add_train_flags(CLI::App* cmd, TrainFlags& f) {
  TrainerOptions& t = f.trainer;
  auto opt = [&](CLI::Option* o) { return o->capture_default_str()->group(kOptimisationGroup); };
  auto out = [&](CLI::Option* o) { return o->capture_default_str()->group(kOutputGroup); };
  opt(cmd->add_option("--epochs", t.epochs, "training epochs"))->check(CLI::Range(1, 1000000));
  opt(cmd->add_option("--steps", f.steps, "stop after N optimizer steps (0: no limit)"))
      ->check(non_negative());
  opt(cmd->add_option("--batch", t.batch_size, "batch size"))->check(CLI::Range(1, 1 << 20));
  opt(cmd->add_option("--optimizer", f.optimizer, "optimizer"))
      ->check(CLI::IsMember({"adamw", "adam", "sgd"}));
  opt(cmd->add_option("--lr", t.lr, "peak learning rate"))->check(CLI::PositiveNumber);
  opt(cmd->add_option("--weight-decay", t.weight_decay, "weight decay (not on biases and norms)"))
      ->check(non_negative());
  opt(cmd->add_option("--schedule", f.schedule, "learning-rate schedule"))
      ->check(CLI::IsMember({"constant", "cosine", "inverse_sqrt", "step"}));
  opt(cmd->add_option("--warmup", t.warmup, "warm-up steps"))->check(non_negative());
  opt(cmd->add_option("--clip", t.clip, "gradient-norm clip (0: off)"))->check(non_negative());
  opt(cmd->add_option("--accumulate", t.accumulate, "micro-batches per optimizer step"))
      ->check(CLI::Range(1, 1 << 16));
  opt(cmd->add_option("--label-smoothing", f.label_smoothing, "label smoothing of the loss"))
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--train-limit", f.train_limit, "use only the first N training examples")
      ->capture_default_str()
      ->check(non_negative())
      ->group(kDataGroup);
  cmd->add_option("--schedule-history", f.schedule_history,
                  "the earlier lengths of a resumed run whose --steps or --epochs changed, as "
                  "STEP:TOTAL:WARMUP (written to config.ini so that --config replays the run; "
                  "see docs/runs.md)")
      ->group(kOptimisationGroup);
  out(cmd->add_option("--eval-every", t.eval_every, "evaluate every N steps (0: every epoch)"))
      ->check(non_negative());
  out(cmd->add_option("--keep-epochs", t.keep_epochs,
                      "also keep the last N end-of-epoch checkpoints as OUT/epoch-E.safetensors "
                      "(for `mixlab average`)"))
      ->check(non_negative());
  out(cmd->add_option(
          "--log-every", t.log_every,
          "steps between train rows in metrics.csv, each the mean loss over its steps "
          "(train_loss_window); on a GPU, also between reads of the loss back to the host"))
      ->check(CLI::PositiveNumber);
  // Neither is written to config.ini: replaying a run's settings must not resume or empty it.
  cmd->add_flag("--resume", t.resume,
                "continue the run in --out from its last.safetensors, with its stored settings")
      ->configurable(false)
      ->group(kRunGroup);
  cmd->add_flag("--overwrite", f.overwrite, "empty a --out that already holds a run")
      ->configurable(false)
      ->group(kOutputGroup);
  cmd->add_flag("--quiet", t.quiet, "no progress output")->group(kOutputGroup);
}

void check_stdout() {
  std::cout.flush();
  if (!std::cout.good()) {
    int err = errno;
    std::cout.clear();  // report once
    fail("cannot write to standard output: ", err ? std::strerror(err) : "write error");
  }
}

void refuse_output_over_input(const std::string& output, const std::string& input,
                              const std::string& command, const std::string& flag,
                              const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(output, ec) || !std::filesystem::equivalent(output, input, ec))
    return;
  throw UsageError(command + ": " + flag + " " + output + " is " + what + " (" + input +
                   "), which it reads; writing there would destroy it. Write elsewhere");
}

CLI::Validator threads_validator() {
  return CLI::Validator([](std::string& text) { return thread_count_problem(text); },
                        "1.." + std::to_string(kMaxThreads));
}

std::string threads_flag_help() {
  return "CPU threads for kernels and matrix products, 1 to " + std::to_string(kMaxThreads) +
         " (default: MIXLAB_NUM_THREADS, else the cores)";
}

Device setup_runtime(const CommonFlags& f) {
  // The pool starts here, before anything is written: threads the system refuses are an error
  // now rather than a stall later.
  set_num_threads(f.threads > 0 ? f.threads : num_threads());
  set_default_padding_rows(f.padding == "skip"   ? PaddingRows::Skip
                           : f.padding == "keep" ? PaddingRows::Keep
                                                 : PaddingRows::Auto);
  Device d;
  try {
    d = parse_device(f.device);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (d.is_cuda() && !device_available(DeviceType::CUDA))
    fail("--device ", f.device, ": no CUDA GPU is available in this build or on this machine");
  return d;
}

std::string describe_device(Device d) {
  if (d.is_cuda()) return d.str();
  if (d.is_ref()) return "ref, the reference kernels on 1 thread";
  int n = num_threads();
  return d.str() + ", " + std::to_string(n) + (n == 1 ? " thread" : " threads");
}

std::map<std::string, std::string> parse_mixer_options(const std::string& mixer,
                                                       const std::vector<std::string>& items) {
  std::map<std::string, std::string> out;
  for (const auto& item : items) {
    if (item.empty()) continue;  // config.ini writes an empty list as mixer-opt=""
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--mixer-opt '" + item + "': expected key=value");
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  // The registry owns names and options; its MixerSpecError is a usage error (exit 2).
  MixerRegistry::instance().check_spec(mixer, out, /*causal=*/false, /*cross=*/false);
  return out;
}

void apply_model_flags(const ModelFlags& f, uint64_t seed, ModelConfig& c) {
  c.mixer = f.mixer;
  c.mixer_options = parse_mixer_options(f.mixer, f.mixer_options);
  c.dim = f.dim;
  c.heads = f.heads;
  c.layers = f.layers;
  c.decoder_layers = f.layers;
  c.ffn_dim = f.ffn_dim;
  c.dropout = f.dropout;
  c.drop_path = f.drop_path;
  c.seed = seed;
  if (c.dim <= 0 || c.heads <= 0 || c.dim % c.heads != 0)
    throw UsageError("--dim " + std::to_string(c.dim) + " must be a positive multiple of --heads " +
                     std::to_string(c.heads));
  try {
    c.positions = parse_position_kind(f.positions);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

TrainerOptions trainer_options(const TrainFlags& f, const CommonFlags& c) {
  TrainerOptions t = f.trainer;
  t.optimizer = parse_optimizer_kind(f.optimizer);  // the CLI checked the names
  t.schedule = parse_schedule_kind(f.schedule);
  t.max_steps = f.steps;
  t.out_dir = c.out;
  t.seed = c.seed;
  t.draw_curves = lab::write_run_curves;
  if (f.steps > 0 && f.steps < t.warmup) t.warmup = std::max<int64_t>(1, f.steps / 10);
  t.schedule_history.clear();
  for (const auto& item : f.schedule_history) {
    if (item.empty()) continue;  // config.ini writes an empty list as schedule-history=""
    try {
      t.schedule_history.push_back(parse_schedule_segment(item));
    } catch (const Error& e) {
      throw UsageError(std::string("--schedule-history: ") + e.what());
    }
  }
  return t;
}

void UnknownTokens::add(const std::vector<std::string>& tokens, const Vocab& vocab) {
  for (const auto& t : tokens) {
    if (vocab.contains(t)) continue;
    ++total_;
    if (std::find(names_.begin(), names_.end(), t) == names_.end()) names_.push_back(t);
  }
}

void UnknownTokens::report(std::ostream& out) const {
  if (total_ == 0) return;
  std::string list;
  const size_t shown = std::min<size_t>(names_.size(), 8);
  for (size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + names_[i];
  if (shown < names_.size()) list += ", ... " + std::to_string(names_.size() - shown) + " more";
  out << "warning: " << total_ << " unknown token" << (total_ == 1 ? "" : "s") << " (" << list
      << ") mapped to <unk>\n";
}

void check_data_fits_checkpoint(const std::string& checkpoint, const std::string& trained_on,
                                const std::string& given, int64_t unknown, int64_t tokens,
                                int64_t longest, int64_t max_len) {
  const std::string both = "--data " + given + " does not fit " + checkpoint +
                           ", which was trained on " + trained_on + ": ";
  if (longest > max_len)
    throw UsageError(both + "it holds a sequence of " + std::to_string(longest) +
                     " positions, the model takes at most " + std::to_string(max_len));
  if (tokens > 0 && 2 * unknown > tokens)
    throw UsageError(both + std::to_string(unknown) + " of its " + std::to_string(tokens) +
                     " tokens are not in the checkpoint's vocabulary (another tokenisation or "
                     "another data set)");
}

void print_summary(const std::string& title, int64_t parameters, const TrainResult& r,
                   const std::map<std::string, double>& test) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"parameters", format_count(parameters)});
  rows.push_back({"steps", format_count(r.steps)});
  rows.push_back({"wall time", format_number(r.seconds, 1) + " s"});
  rows.push_back({"throughput", format_number(r.examples_per_second, 1) + " examples/s, " +
                                    format_number(r.tokens_per_second, 0) + " tokens/s"});
  rows.push_back({"final train loss", format_number(r.last_train_loss, 4)});
  for (const auto& [k, v] : r.best_valid)
    rows.push_back(
        {"best valid " + k + " (step " + std::to_string(r.best_step) + ")", format_number(v, 4)});
  for (const auto& [k, v] : test) rows.push_back({"test " + k, format_number(v, 4)});
  std::cout << "\n" << title << "\n" << format_table({"", "value"}, rows);
}

}  // namespace mixlab::app
