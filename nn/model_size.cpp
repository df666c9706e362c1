#include "nn/model_size.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "nn/conv_tokenizer.h"
#include "nn/mixer_registry.h"

namespace mixlab {

namespace {

// One part of a model: its parameter count and the setting that sizes it.
struct Part {
  std::string what;     // "FFN weights (2 blocks of 2 x 64 x 256)"
  std::string setting;  // "--dim 64 / --ffn-dim 0"
  double parameters = 0;
};

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000 && u < 6) bytes /= 1000, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::string format_count(double n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, n < 1e6 ? "%.0f" : "%.3g", n);
  return buf;
}

// The registry's count for one mixer, or 0 when the sizes are beyond what its integer formula
// can hold (the other parts then decide) or the mixer is unknown (refused elsewhere by name).
double mixer_parameters(const ModelConfig& c, const std::string& name,
                        const std::map<std::string, std::string>& options, int64_t max_len,
                        bool causal) {
  if (c.dim > (1 << 20) || max_len > (1 << 20)) return 0;
  try {
    const MixerInfo& info = MixerRegistry::instance().find(name);
    if (!info.expected_parameters) return 0;
    MixerConfig m;
    m.name = name;
    m.dim = c.dim;
    m.heads = c.heads;
    m.max_len = max_len;
    m.causal = causal;
    m.options = options;
    m.block_ffn_dim = c.ffn_dim;
    return static_cast<double>(info.expected_parameters(m));
  } catch (const std::exception&) {
    return 0;
  }
}

std::vector<Part> parts_of(const ModelConfig& c) {
  const double d = static_cast<double>(c.dim);
  const double f = c.ffn_dim > 0 ? static_cast<double>(c.ffn_dim) : 4 * d;
  const bool translator = c.task == ModelTask::Translate;
  const double blocks =
      static_cast<double>(c.layers) + (translator ? static_cast<double>(c.decoder_layers) : 0);
  const std::string width = "--dim " + std::to_string(c.dim) + " and --ffn-dim " +
                            std::to_string(c.ffn_dim) + " (0: 4 x dim)";
  std::vector<Part> parts;
  parts.push_back({"FFN weights", width, blocks * (2 * d * f + d + f)});
  parts.push_back(
      {"position tables",
       "--max-len (or the data's longest example): max_len " + std::to_string(c.max_len) +
           (translator ? ", tgt_max_len " + std::to_string(c.tgt_max_len) : std::string()) +
           ", --dim " + std::to_string(c.dim),
       (static_cast<double>(c.max_len) + (translator ? static_cast<double>(c.tgt_max_len) : 0)) *
           d});
  const double vocab = static_cast<double>(c.vocab) + (translator ? c.tgt_vocab : 0);
  parts.push_back(
      {"embedding tables and output layer",
       "the vocabulary (" + std::to_string(c.vocab) +
           (translator ? " -> " + std::to_string(c.tgt_vocab) : std::string()) +
           " tokens) and --dim " + std::to_string(c.dim),
       vocab * d + (translator ? static_cast<double>(c.tgt_vocab) : c.classes) * (d + 1)});
  if (c.input == InputKind::Image && !translator && c.stem == ImageStem::Conv)
    parts.push_back(
        {"convolutional tokenizer",
         "--stem conv, --patch " + std::to_string(c.patch) + " and --dim " + std::to_string(c.dim),
         static_cast<double>(ConvTokenizer::parameters_for(c.image_channels, c.patch, c.dim))});
  else if (c.input == InputKind::Image && !translator)
    parts.push_back({"patch embedding",
                     "--patch " + std::to_string(c.patch) + " and --dim " + std::to_string(c.dim),
                     static_cast<double>(c.patch) * c.patch * c.image_channels * d});
  double mixers =
      static_cast<double>(c.layers) * mixer_parameters(c, c.mixer, c.mixer_options, c.max_len,
                                                       /*causal=*/false);
  if (translator)
    mixers += static_cast<double>(c.decoder_layers) *
              (mixer_parameters(c, c.decoder_mixer, c.decoder_mixer_options, c.tgt_max_len, true) +
               mixer_parameters(c, c.cross, {}, c.max_len, false));
  parts.push_back({"mixer parameters",
                   "--dim " + std::to_string(c.dim) + ", --mixer " + c.mixer + " and its options",
                   mixers});
  return parts;
}

}  // namespace

double planned_parameters(const ModelConfig& c) {
  double total = 0;
  for (const Part& p : parts_of(c)) total += p.parameters;
  return total;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

void check_model_size(const ModelConfig& c, double memory_bytes) {
  if (memory_bytes <= 0) memory_bytes = physical_memory_bytes();
  if (memory_bytes <= 0) return;
  const std::vector<Part> parts = parts_of(c);
  double total = 0;
  for (const Part& p : parts) total += p.parameters;
  const double bytes = total * kTrainingBytesPerParameter;
  if (bytes <= memory_bytes) return;
  const Part& largest =
      *std::max_element(parts.begin(), parts.end(),
                        [](const Part& a, const Part& b) { return a.parameters < b.parameters; });
  fail("the model is too big: ", format_count(total), " parameters, ", format_bytes(bytes),
       " to train (weights, gradients and optimizer state), more than this machine's ",
       format_bytes(memory_bytes), " of memory; the most are its ", largest.what, " (",
       format_count(largest.parameters), " parameters), sized by ", largest.setting);
}

void check_batch_size(const ModelConfig& c, int64_t batch, double memory_bytes) {
  if (memory_bytes <= 0) memory_bytes = physical_memory_bytes();
  if (memory_bytes <= 0) return;
  const double d = static_cast<double>(c.dim);
  const double f = c.ffn_dim > 0 ? static_cast<double>(c.ffn_dim) : 4 * d;
  const bool translator = c.task == ModelTask::Translate;
  const double tokens_per_block =
      static_cast<double>(c.max_len) * c.layers +
      (translator ? static_cast<double>(c.tgt_max_len) * c.decoder_layers : 0);
  const double bytes = static_cast<double>(batch) * tokens_per_block * (f + 4 * d) * 4;
  if (bytes <= memory_bytes) return;
  fail("--batch ", batch, " is too big: one batch at max_len ", c.max_len, " keeps at least ",
       format_bytes(bytes), " of activations for the backward pass, more than this machine's ",
       format_bytes(memory_bytes), " of memory");
}

}  // namespace mixlab
