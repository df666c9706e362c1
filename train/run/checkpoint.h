// Model weights and full training checkpoints as single safetensors files.
//
// Weights: every parameter AND buffer of the module under its dotted path
// ("encoder.layers.0.mixer.w_v.weight"), in its own dtype (F32, F64 or I32), so that the file
// also opens with Python's safetensors as an ordinary state dict.
//
// Training checkpoint: the same tensors, plus the optimizer's state tensors under
// "optimizer.<param name>.<slot>" (e.g. "optimizer.fc1.weight.exp_avg"), plus the training
// state in the string-to-string __metadata__:
//
//   mixlab.format    "weights/1" or "training_checkpoint/1"
//   mixlab.checksum  "crc32:<8 hex>" over the metadata and every tensor (see below)
//   step, epoch, loader_position, rng_seed, rng_counter   decimal integers
//   config           the run's configuration, a JSON text (may be empty)
//   vocab_src, vocab_tgt   Vocab::to_string() texts (may be empty)
//   extra            a JSON object of strings
//   optimizer        Optimizer::state_json() (type, lr, per-parameter step counts, ...)
//
// Why a checksum: safetensors itself detects only structural damage (bad header, sizes); a bit
// flipped in a tensor's data, or in a metadata value such as the step count, would load
// silently. CRC-32 catches every single-byte (indeed every burst up to 32 bits) error. Files
// without one (from other tools) load without that check.
//
// Loading is all or nothing: the whole file is read and validated (checksum, every name present
// with no extras, shapes and dtypes, training state and optimizer state), and only then is
// anything modified. Errors list every missing, unexpected and mismatching name (with both
// shapes). Tensors are copied into the module's existing storage on its current device, so
// handles held elsewhere (an optimizer) stay valid; gradients are left as they are.
//
// Writing is atomic (io/atomic_file.h): a crash or failure mid-write leaves the previous file.
//
// Exact resume: saving after update N and loading into fresh objects continues bit-identically
// when the caller also restores the data order and randomness recorded here:
//   state.step = updates done; state.epoch / loader_position = loader.epoch() / position();
//   capture_rng(state) after the last update (the dropout stream is default_generator()).
// and after loading: restore_rng(state); loader.start_epoch(state.epoch, state.loader_position);
// the lr for update t comes from the schedule (train/optim/schedule.h) as a function of t alone.
#pragma once
#include <cstdint>
#include <map>
#include <functional>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/module.h"
#include "train/optim/optimizer.h"
#include "io/safetensors.h"

namespace mixlab {

// `metadata` is stored as given; keys starting with "mixlab." are reserved.
void save_weights(const std::string& path, const Module& model,
                  const std::map<std::string, std::string>& metadata = {});

// Loads a weights file, or the model part of a training checkpoint. Returns the file's metadata.
// Older key names are renamed (train/run/checkpoint_names.h) and F16 tensors widened to F32
// first.
std::map<std::string, std::string> load_weights(const std::string& path, Module& model);

// Checkpoint averaging (as fairseq's average_checkpoints.py): the model tensors of `inputs`,
// checkpoints or weights files of one model, averaged element by element (in float64, rounded
// once to the file's dtype) and written to `output` as a weights file. The first input's config,
// vocab_src, vocab_tgt and extra metadata are carried over, so `eval` and `run` take the result
// like any checkpoint. Every input is read and checked (checksum, same tensor names, shapes and
// dtypes; I32 buffers must be equal; one model configuration apart from seed and dropout, the same
// vocabularies and label names) before anything is written; errors name the file and tensor.
// A tensor held under two names (an old and a current one, checkpoint_names.h) is refused by
// every loader, naming both.
// Optimizer state is not averaged: the result is for evaluation, not for resuming.
// `progress`, if given, is told how many inputs have been read and verified so far.
void average_checkpoints(const std::vector<std::string>& inputs, const std::string& output,
                         const std::function<void(size_t read)>& progress = {});

// Weights-only export (`mixlab export`): the model tensors of a checkpoint or weights file, no
// optimizer state, with the config, vocab_src, vocab_tgt and extra metadata carried over (plus
// exported_at_step and exported_dtype), so every command that takes a checkpoint takes it.
// F16 stores F32 tensors as IEEE half (round to nearest even; F64 and I32 stay as they are);
// loading widens them back to F32. A finite value beyond the half range is an error.
enum class ExportDType { F32, F16 };
void export_weights(const std::string& input, const std::string& output, ExportDType dtype);

struct TrainingState {
  int64_t step = 0;                        // optimizer updates completed
  int64_t epoch = 0;                       // the epoch in progress (DataLoader::epoch())
  int64_t loader_position = 0;             // batches of it handed out (DataLoader::position())
  uint64_t rng_seed = 0, rng_counter = 0;  // default_generator()'s state
  std::string config_json;                 // empty, or any JSON text
  std::string vocab_src, vocab_tgt;        // Vocab::to_string(), or empty
  std::map<std::string, std::string> extra;

  bool operator==(const TrainingState&) const = default;
};

// The "mixlab.checksum" value (crc32:<8 hex>) for these tensors and metadata (the checksum key
// itself is left out): what a file must hold to pass the check at load. For tools and the fuzz
// targets that build files by hand.
std::string checkpoint_checksum(const std::vector<TensorRecord>& tensors,
                                const std::map<std::string, std::string>& metadata);

// state.rng_* = gen's state / gen's state = state.rng_*.
void capture_rng(TrainingState& state, const Generator& gen = default_generator());
void restore_rng(const TrainingState& state, Generator& gen = default_generator());

void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const TrainingState& state);

// Restores model weights and optimizer state (all or nothing, see above) and returns the state;
// restoring the generator and the loader is the caller's (restore_rng, start_epoch).
TrainingState load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer);

}  // namespace mixlab
