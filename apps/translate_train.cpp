// `mixlab translate train`: an encoder-decoder whose encoder uses --mixer, whose decoder
// self-mixer uses --decoder-mixer (causal-capable mixers only) and whose cross-mixer is
// dot-product attention, trained on the data apps/translate_data.h reads; the sequence around
// it is apps/train_command.h's.
//
// Expected output of `mixlab translate train --steps 1500`: progress bars, validation exact
// match each epoch, then a summary table (exact match, token accuracy, BLEU; for g2p also WER and
// PER) and a few sample translations next to their references.
#include <algorithm>
#include <iostream>

#include "apps/cli_style.h"
#include "apps/commands.h"
#include "apps/train_command.h"
#include "apps/translate_data.h"
#include "core/strings.h"
#include "nn/mixer_registry.h"
#include "train/data/vocab.h"

namespace mixlab::app {

namespace {

// The translator's part of the train command (apps/train_command.h).
struct TranslateTrain {
  using Model = Translator;
  static constexpr const char* kTask = "translate";
  TrainCommandFlags flags;
  DecodeFlags decode;
  std::string split = "simple", tokens = "words", decoder_mixer = "attention", cross = "attention";
  std::vector<std::string> decoder_options;
  bool tie = false;
  std::string train_targets;   // g2p: sequence-level distillation's targets
  int64_t unused_targets = 0;  // lines of --train-targets for words outside the training words
  TranslationData data;
  Vocab src, tgt;
  InMemoryDataset train_pairs, valid_pairs;  // encoded once the run folder is open

  TranslateTrain() {
    flags.common.out = "runs/translate";
    flags.train.trainer.batch_size = 64;
    flags.train.trainer.epochs = 20;
    flags.train.trainer.bucket_by_length = true;
  }

  void add_flags(CLI::App* cmd) {
    add_decode_flags(cmd, decode);
    cmd->add_option("--split", split, "SCAN split")
        ->capture_default_str()
        ->check(CLI::IsMember({"simple", "length", "addprim_jump"}))
        ->group(kDataGroup);
    cmd->add_option("--tokens", tokens, "TSV data: tokens are words or chars")
        ->capture_default_str()
        ->check(CLI::IsMember({"words", "chars"}))
        ->group(kDataGroup);
    cmd->add_option("--train-targets", train_targets,
                    "g2p: train on the pronunciations in FILE (WORD<TAB>phonemes per line, e.g. "
                    "an ensemble's output for the training words: sequence-level distillation) "
                    "instead of the dictionary's; validation and test keep the dictionary's")
        ->group(kDataGroup);
    cmd->add_option("--decoder-mixer", decoder_mixer, "the decoder's causal self-mixer")
        ->capture_default_str()
        ->group(kModelGroup);
    cmd->add_option("--decoder-mixer-opt", decoder_options, "a decoder mixer option key=value")
        ->group(kModelGroup);
    cmd->add_option("--cross", cross, "the cross-mixer (dot-product attention)")
        ->capture_default_str()
        ->group(kModelGroup);
    cmd->add_flag("--tie-output", tie, "tie the output layer to the target embedding")
        ->group(kModelGroup);
  }

  // The flags' part of the model's configuration, checked before any data is read.
  ModelConfig flag_config() const {
    ModelConfig config;
    config.task = ModelTask::Translate;
    apply_model_flags(flags.model, flags.common.seed, config);
    config.decoder_mixer = decoder_mixer;
    config.decoder_mixer_options = parse_mixer_options(decoder_mixer, decoder_options);
    // Refused here, before any data is read, by the registry (MixerSpecError: exit 2).
    const MixerRegistry& reg = MixerRegistry::instance();
    reg.check_spec(decoder_mixer, config.decoder_mixer_options, /*causal=*/true, false);
    reg.check_spec(cross, {}, false, /*cross=*/true);
    config.cross = cross;
    config.tie_output = tie;
    return config;
  }

  // The lengths the data needs: +1 for <eos> on the source, +2 for <bos>/<eos> on the target;
  // the test split may be longer.
  void fit_lengths(ModelConfig& config) const {
    config.max_len = std::max({longest_side(data.train, true), longest_side(data.valid, true),
                               longest_side(data.test, true)}) +
                     1;
    config.tgt_max_len = std::max({longest_side(data.train, false), longest_side(data.valid, false),
                                   longest_side(data.test, false)}) +
                         2;
    // A file's lines were measured as it was read (naming the line); the other sources here.
    const int64_t limit = std::max(kDataLengthCap, flags.model.max_len);
    if (const int64_t n = std::max(config.max_len - 1, config.tgt_max_len - 2); n > limit)
      throw UsageError(data.description + ": the longest example has " + std::to_string(n) +
                       " tokens, more than " + std::to_string(limit) +
                       ", the longest a model takes its length from; pass --max-len " +
                       std::to_string(n) + " to train on it");
    if (flags.model.max_len > 0) {
      config.max_len = std::max(config.max_len, flags.model.max_len);
      config.tgt_max_len = std::max(config.tgt_max_len, flags.model.max_len);
    }
  }

  ModelConfig prepare() {
    ModelConfig config = flag_config();
    const DataDescription desc =
        describe_translate_data(flags.common.data, split, tokens, flags.common.seed);
    if (desc.kind == DataKind::G2p && !desc.path.empty())
      throw UsageError("--data g2p:" + desc.path +
                       ": a word list is for `translate eval`; train with --data g2p");
    data = load_translate_data(desc, std::max(kDataLengthCap, flags.model.max_len));
    if (!train_targets.empty()) unused_targets = replace_g2p_train_targets(data, train_targets);
    const int64_t limit = flags.train.train_limit;
    if (limit > 0 && limit < static_cast<int64_t>(data.train.size())) data.train.resize(limit);
    src = build_src_vocab(data.train);
    tgt = build_tgt_vocab(data.train);
    fit_lengths(config);
    config.vocab = static_cast<int64_t>(src.size());
    config.tgt_vocab = static_cast<int64_t>(tgt.size());
    return config;
  }

  void adjust(TrainerOptions&) {}

  void describe(std::ostream& out, const ModelConfig& config, const Model& model, Device device) {
    out << "data: " << data.description << ": " << data.train.size() << " train, "
        << data.valid.size() << " valid, " << data.test.size() << " test; vocab " << src.size()
        << " -> " << tgt.size() << "\n";
    if (unused_targets > 0)
      out << "data: " << unused_targets
          << " words of --train-targets are not training words (dev or test words): not used\n";
    out << "model: " << config.mixer << " encoder, " << config.decoder_mixer << " decoder, "
        << model.parameter_count() << " parameters, on " << describe_device(device) << "\n";
  }

  std::string data_json() const { return data.desc.to_json().dump(); }

  TranslationTask make_task(Model& model, Device device) {
    train_pairs = encode_seq2seq(data.train, src, tgt);
    valid_pairs = encode_seq2seq(data.valid, src, tgt);
    TranslationTask task(model, device, flags.train.label_smoothing,
                         decode_options(decode, model.config()));
    if (!data.valid_refs.empty()) task.set_references(encode_refs(data.valid_refs, tgt));
    return task;
  }
  const Dataset& train_set() const { return train_pairs; }
  const Dataset* valid_set() const { return &valid_pairs; }

  TrainingState metadata(const ModelConfig& config) const {
    TrainingState meta;
    meta.config_json = config.to_json().dump();
    meta.vocab_src = src.to_string();
    meta.vocab_tgt = tgt.to_string();
    meta.extra["data"] = data.desc.to_json().dump();
    meta.extra["src_tokens"] = data.src_tokens;
    meta.extra["tgt_join"] = data.tgt_join;
    return meta;
  }

  std::map<std::string, double> test(TranslationTask& task) {
    return test_and_show(task, data, src, tgt, 5);
  }
  std::string title(const ModelConfig& config) const {
    return "translate: " + config.mixer + " / " + config.decoder_mixer + " on " + data.description;
  }

  // Translating a test sentence with the best checkpoint, and scoring it with a beam.
  std::vector<std::string> next_commands(const std::string& mixlab, const std::string& best) const {
    const std::string sample =
        data.test.empty() ? "..." : join(data.test[0].src, data.src_tokens == "chars" ? "" : " ");
    return {"echo " + shell_quote(sample) + " | " + mixlab + " translate run --checkpoint " + best,
            mixlab + " translate eval --checkpoint " + best + " --beam 4"};
  }
};

}  // namespace

void add_translate_train_command(CLI::App& translate) {
  add_train_command<TranslateTrain>(translate, "train a translator");
}

}  // namespace mixlab::app
