#include "apps/common.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/parallel.h"
#include "nn/mixer_registry.h"
#include "train/atomic_file.h"
#include "train/safetensors.h"
#include "train/summary.h"

namespace mixlab::app {

void add_common_flags(CLI::App* cmd, CommonFlags& f) {
  cmd->add_option("--data", f.data, "data set name or path (default: the command's built-in set)");
  cmd->add_option("--out", f.out, "output directory for checkpoints, metrics, plots and config");
  cmd->add_option("--seed", f.seed, "seed for initialisation, data order and dropout")
      ->capture_default_str();
  cmd->add_option("--threads", f.threads,
                  "CPU threads for kernels and matrix products (0: all cores)")
      ->capture_default_str();
  cmd->add_option("--device", f.device, "cpu or cuda")->capture_default_str();
}

void add_model_flags(CLI::App* cmd, ModelFlags& f) {
  cmd->add_option("--mixer", f.mixer, "token mixer (see `mixlab mixers`)")->capture_default_str();
  cmd->add_option("--mixer-opt", f.mixer_options,
                  "a mixer option key=value (repeatable), e.g. --mixer-opt rank=4");
  cmd->add_option("--dim", f.dim, "model width d")->capture_default_str();
  cmd->add_option("--heads", f.heads, "heads h")->capture_default_str();
  cmd->add_option("--layers", f.layers, "encoder (and decoder) blocks")->capture_default_str();
  cmd->add_option("--ffn-dim", f.ffn_dim, "FFN hidden width f (0: 4d)")->capture_default_str();
  cmd->add_option("--max-len", f.max_len, "max length ℓ (0: the longest sequence in the data)")
      ->capture_default_str();
  cmd->add_option("--dropout", f.dropout, "residual dropout rate")->capture_default_str();
  cmd->add_option("--pos", f.positions, "positional embedding: learned, sinusoidal or none")
      ->capture_default_str();
}

void add_train_flags(CLI::App* cmd, TrainFlags& f) {
  TrainerOptions& t = f.trainer;
  cmd->add_option("--epochs", t.epochs, "training epochs")->capture_default_str();
  cmd->add_option("--steps", f.steps, "stop after N optimizer steps (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--batch", t.batch_size, "batch size")->capture_default_str();
  cmd->add_option("--optimizer", t.optimizer, "adamw, adam or sgd")->capture_default_str();
  cmd->add_option("--lr", t.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", t.weight_decay, "weight decay (not on biases and norms)")
      ->capture_default_str();
  cmd->add_option("--schedule", t.schedule, "constant, cosine, inverse_sqrt or step")
      ->capture_default_str();
  cmd->add_option("--warmup", t.warmup, "warm-up steps")->capture_default_str();
  cmd->add_option("--clip", t.clip, "gradient-norm clip (0: off)")->capture_default_str();
  cmd->add_option("--accumulate", t.accumulate, "micro-batches per optimizer step")
      ->capture_default_str();
  cmd->add_option("--label-smoothing", f.label_smoothing, "label smoothing of the loss")
      ->capture_default_str();
  cmd->add_option("--eval-every", t.eval_every, "evaluate every N steps (0: every epoch)")
      ->capture_default_str();
  cmd->add_option("--keep-epochs", t.keep_epochs,
                  "also keep the last N end-of-epoch checkpoints as OUT/epoch-E.safetensors "
                  "(for `mixlab average`)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--log-every", t.log_every, "steps between train-loss rows in metrics.csv")
      ->capture_default_str();
  cmd->add_option("--train-limit", f.train_limit, "use only the first N training examples")
      ->capture_default_str();
  cmd->add_flag("--resume", t.resume, "continue from OUT/last.safetensors");
  cmd->add_flag("--quiet", t.quiet, "no progress output");
}

Device setup_runtime(const CommonFlags& f) {
  if (f.threads > 0) set_num_threads(f.threads);
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

std::map<std::string, std::string> parse_mixer_options(const std::string& mixer,
                                                       const std::vector<std::string>& items) {
  std::map<std::string, std::string> out;
  for (const auto& item : items) {
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
  c.positions = f.positions;
  c.seed = seed;
  if (c.dim <= 0 || c.heads <= 0 || c.dim % c.heads != 0)
    throw UsageError("--dim " + std::to_string(c.dim) + " must be a positive multiple of --heads " +
                     std::to_string(c.heads));
  try {
    parse_position_kind(c.positions);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

TrainerOptions trainer_options(const TrainFlags& f, const CommonFlags& c) {
  TrainerOptions t = f.trainer;
  t.max_steps = f.steps;
  t.out_dir = c.out;
  t.seed = c.seed;
  if (f.steps > 0 && f.steps < t.warmup) t.warmup = std::max<int64_t>(1, f.steps / 10);
  return t;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  check(std::filesystem::exists(path), "checkpoint '", path, "' does not exist");
  SafetensorsFile file = load_safetensors(path);
  CheckpointInfo info;
  auto get = [&](const char* key) {
    auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string() : it->second;
  };
  std::string config = get("config");
  check(!config.empty(), "checkpoint '", path, "' holds no model configuration");
  info.config = ModelConfig::from_json(Json::parse(config));
  info.vocab_src = get("vocab_src");
  info.vocab_tgt = get("vocab_tgt");
  std::string extra = get("extra");
  if (!extra.empty()) {
    Json parsed = Json::parse(extra);  // named: a loop over a temporary's member would dangle
    for (const auto& [k, v] : parsed.as_object()) info.extra[k] = v.as_string();
  }
  return info;
}

void save_run_config(const CLI::App& cmd, const ModelConfig& config, const std::string& dir) {
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  write_file_atomically(dir + "/config.ini", std::string_view(cmd.config_to_str(true, true)));
  write_file_atomically(dir + "/model.json", std::string_view(config.to_json().dump() + "\n"));
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
