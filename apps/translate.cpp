// `mixlab translate train|eval|run`: an encoder-decoder whose encoder uses --mixer, whose
// decoder self-mixer uses --decoder-mixer (causal-capable mixers only) and whose
// cross-mixer is dot-product attention.
//
// Data (--data): scan (generated; --split simple|length|addprim_jump; 5% of train held out for
// validation), g2p (CMUdict g014b2b shipped in data/g2p: 2,670 training words held out as the
// dev set, the same for every --seed; test = the 12,000 test words scored with all their
// references), or a `source<TAB>target` file (--tokens words|chars; last 10% held out). Default:
// SCAN simple.
//
// Expected output of `mixlab translate train --steps 1500`: progress bars, validation exact
// match each epoch, then a summary table (exact match, token accuracy, BLEU; for g2p also WER and
// PER) and a few sample translations next to their references.
#include <filesystem>
#include <iostream>

#include <unistd.h>

#include "apps/commands.h"
#include "apps/cli_style.h"
#include "apps/common.h"
#include "apps/data_description.h"
#include "apps/run_folder.h"
#include "autograd/grad_mode.h"
#include "core/random.h"
#include "core/strings.h"
#include "nn/mixer_registry.h"
#include "nn/model_size.h"
#include "train/data/cmudict.h"
#include "train/data/scan.h"
#include "train/data/seq2seq_text.h"
#include "train/data/text_files.h"
#include "train/distributed/distributed.h"
#include "train/run/summary.h"
#include "train/data/vocab.h"

namespace mixlab::app {

namespace {

struct TranslationData {
  std::vector<Seq2SeqText> train, valid, test;
  // Several references per example (g2p), as token strings; empty when one reference each.
  std::vector<std::vector<std::vector<std::string>>> valid_refs, test_refs;
  std::string tgt_join = " ";  // how output tokens are joined when printed
  std::string src_tokens = "words";
  DataDescription desc;
  std::string description;  // desc.summary()
};

// Moves a seeded `fraction` of `pool` into `held` (order otherwise kept).
void hold_out(std::vector<Seq2SeqText>& pool, std::vector<Seq2SeqText>& held, double fraction,
              uint64_t seed) {
  Generator gen(holdout_seed(seed));
  std::vector<Seq2SeqText> keep;
  for (auto& p : pool) (gen.uniform() < fraction ? held : keep).push_back(std::move(p));
  pool = std::move(keep);
}

void g2p_side(const std::vector<G2PEntry>& entries, std::vector<Seq2SeqText>& pairs,
              std::vector<std::vector<std::vector<std::string>>>& refs) {
  for (const auto& e : entries) {
    // One example per word: its first pronunciation is the teacher-forced target, every
    // pronunciation is a reference for WER/PER.
    std::vector<Seq2SeqText> all = g2p_pairs({e});
    pairs.push_back(all.front());
    std::vector<std::vector<std::string>> r;
    for (auto& p : all) r.push_back(p.tgt);
    refs.push_back(std::move(r));
  }
}

// The data the flags name (usage errors for values outside the closed sets).
DataDescription describe_data(const std::string& name_in, const std::string& split,
                              const std::string& tokens, uint64_t seed) {
  std::string name = name_in.empty() ? "scan" : name_in;
  DataDescription d;
  d.seed = seed;
  if (name == "scan") {
    d.kind = DataKind::Scan;
    d.split = split;
    d.held_out = "5% of train, chosen by the seed";
  } else if (name == "g2p") {
    d.kind = DataKind::G2p;
    d.held_out = "2,670 training words, the same for every seed";
  } else if (name.rfind("g2p:", 0) == 0) {
    // A word list to score a G2P model on, in g014b2b.ref's format (scripts/g2p_unseen_words.py
    // makes one of CMUdict words outside the split): evaluation only.
    const std::string list = name.substr(4);
    if (!std::filesystem::is_regular_file(list))
      throw UsageError("--data '" + name + "': " + list + " is not a file");
    d.kind = DataKind::G2p;
    d.path = absolute_path(list);
    d.held_out = "none: every word of the list is scored";
  } else if (std::filesystem::is_regular_file(name)) {
    if (tokens != "words" && tokens != "chars")
      throw UsageError("--tokens " + tokens + ": expected words or chars");
    d.kind = DataKind::Tsv;
    d.path = absolute_path(name);
    d.tokens = tokens;
    d.held_out = "the last 10% of lines (also the test set)";
  } else {
    throw UsageError("--data '" + name +
                     "': expected scan, g2p, g2p:WORD_LIST or a source<TAB>target file");
  }
  return d;
}

TranslationData load_data(const DataDescription& desc, int64_t max_tokens = kDataLengthCap) {
  TranslationData d;
  if (desc.kind == DataKind::Scan) {
    ScanSplit s;
    try {
      s = scan_split(desc.split, desc.seed);
    } catch (const Error& e) {
      throw UsageError(std::string("--split: ") + e.what());
    }
    d.train = std::move(s.train);
    d.test = std::move(s.test);
    hold_out(d.train, d.valid, 0.05, desc.seed);
  } else if (desc.kind == DataKind::G2p && !desc.path.empty()) {
    g2p_side(read_g2p_ref(desc.path), d.test, d.test_refs);
    d.valid = d.test;
    d.valid_refs = d.test_refs;
    d.src_tokens = "chars";
  } else if (desc.kind == DataKind::G2p) {
    // The dev words do not follow --seed: runs with other seeds are chosen on (and can be
    // ensembled over) the same 2,670 held-out words. Seed 0 gives the split earlier runs used.
    G2PData g = load_g2p(default_g2p_dir(), 2670, /*seed=*/0);
    d.train = g2p_pairs(g.train);
    g2p_side(g.dev, d.valid, d.valid_refs);
    g2p_side(g.test, d.test, d.test_refs);
    d.src_tokens = "chars";
  } else if (desc.kind == DataKind::Tsv) {
    bool chars = desc.tokens == "chars";
    d.train = read_parallel_tsv(desc.path, chars ? Tokenization::kChars : Tokenization::kWords,
                                max_tokens);
    size_t hold = std::max<size_t>(1, d.train.size() / 10);
    check(d.train.size() > hold, desc.path, ": too few pairs to hold out a validation set");
    d.valid.assign(d.train.end() - hold, d.train.end());
    d.train.resize(d.train.size() - hold);
    d.test = d.valid;
    d.src_tokens = desc.tokens;
    if (chars) d.tgt_join = "";
  } else {
    fail("the data of kind '", to_string(desc.kind), "' is not translation data");
  }
  d.desc = desc;
  d.description = desc.summary();
  return d;
}

std::vector<std::vector<std::vector<int32_t>>> encode_refs(
    const std::vector<std::vector<std::vector<std::string>>>& refs, const Vocab& vocab) {
  std::vector<std::vector<std::vector<int32_t>>> out;
  for (const auto& word : refs) {
    std::vector<std::vector<int32_t>> r;
    for (const auto& p : word) r.push_back(vocab.encode(p));
    out.push_back(std::move(r));
  }
  return out;
}

int64_t longest(const std::vector<Seq2SeqText>& pairs, bool src) {
  size_t n = 0;
  for (const auto& p : pairs) n = std::max(n, (src ? p.src : p.tgt).size());
  return static_cast<int64_t>(n);
}

std::vector<std::string> tokenize(const std::string& line, const std::string& kind) {
  return kind == "chars" ? tokenize_chars(line) : tokenize_words(line);
}

std::string clip_text(const std::string& s, size_t width = 48) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

struct DecodeFlags {
  int64_t beam = 1;
  double length_penalty = 1.0;
  int64_t max_output = 0;  // 0: the model's target max_len - 1
};

void add_decode_flags(CLI::App* cmd, DecodeFlags& f) {
  cmd->add_option("--beam", f.beam, "beam width (1: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024))
      ->group(kDecodingGroup);
  cmd->add_option("--length-penalty", f.length_penalty, "beam length penalty alpha (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6))
      ->group(kDecodingGroup);
  cmd->add_option("--max-output", f.max_output, "longest output (0: the model's limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20))
      ->group(kDecodingGroup);
}

DecodeOptions decode_options(const DecodeFlags& f, const ModelConfig& c) {
  if (f.beam < 1) throw UsageError("--beam must be at least 1");
  DecodeOptions o;
  o.beam = f.beam;
  o.length_penalty = f.length_penalty;
  o.max_len = f.max_output > 0 ? f.max_output : c.tgt_max_len - 1;
  o.bos = Vocab::kBos;
  o.eos = Vocab::kEos;
  return o;
}

struct Loaded {
  CheckpointInfo info;
  std::unique_ptr<Translator> model;
  Vocab src, tgt;
};
Loaded load_model(const std::string& checkpoint, Device device) {
  Loaded l;
  l.info = read_checkpoint_info(checkpoint);
  l.model = std::make_unique<Translator>(l.info.config);
  load_weights(checkpoint, *l.model);
  l.model->to(device);
  l.model->eval();
  l.src = Vocab::from_string(l.info.vocab_src);
  l.tgt = Vocab::from_string(l.info.vocab_tgt);
  return l;
}

// Several checkpoints decode as an ensemble; they must agree on both vocabularies.
std::vector<Loaded> load_models(const std::vector<std::string>& checkpoints, Device device) {
  std::vector<Loaded> out;
  for (const auto& c : checkpoints) {
    out.push_back(load_model(c, device));
    const Loaded& l = out.back();
    if (l.src.to_string() != out[0].src.to_string() || l.tgt.to_string() != out[0].tgt.to_string())
      throw UsageError("--checkpoint " + c + " has other vocabularies than " + checkpoints[0] +
                       "; an ensemble needs models trained on the same data");
  }
  return out;
}

std::vector<Translator*> others(std::vector<Loaded>& models) {
  std::vector<Translator*> out;
  for (size_t i = 1; i < models.size(); ++i) out.push_back(models[i].model.get());
  return out;
}

// Evaluates on a test set and prints metrics and a few samples next to their references.
std::map<std::string, double> test_and_show(TranslationTask& task, const TranslationData& d,
                                            const Vocab& src, const Vocab& tgt, int samples) {
  InMemoryDataset test = encode_seq2seq(d.test, src, tgt);
  if (!d.test_refs.empty())
    task.set_references(encode_refs(d.test_refs, tgt));
  else
    task.set_references({});
  auto metrics = task.evaluate(test);
  if (samples > 0) {
    InMemoryDataset few(std::vector<Example>(
        test.examples().begin(), test.examples().begin() + std::min<size_t>(samples, test.size())));
    auto hyps = task.translate(few);
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < hyps.size(); ++i) {
      std::string out = join(tgt.decode(hyps[i]), d.tgt_join);
      std::string ref = join(d.test[i].tgt, d.tgt_join);
      rows.push_back({clip_text(join(d.test[i].src, d.src_tokens == "chars" ? "" : " ")),
                      clip_text(out), clip_text(ref), out == ref ? "ok" : "x"});
    }
    std::cout << "\nsample predictions\n"
              << format_table({"source", "output", "reference", ""}, rows);
  }
  return metrics;
}

}  // namespace

void add_translate_commands(CLI::App& root) {
  CLI::App* translate = root.add_subcommand("translate", "sequence-to-sequence models");
  translate->require_subcommand(1);

  struct TrainArgs {
    CommonFlags common;
    ModelFlags model;
    TrainFlags train;
    DecodeFlags decode;
    std::string split = "simple", tokens = "words", decoder_mixer = "attention",
                cross = "attention";
    std::vector<std::string> decoder_options;
    bool tie = false;
  };
  auto a = std::make_shared<TrainArgs>();
  a->common.out = "runs/translate";
  a->train.trainer.batch_size = 64;
  a->train.trainer.epochs = 20;
  a->train.trainer.bucket_by_length = true;
  CLI::App* train = translate->add_subcommand("train", "train a translator");
  add_common_flags(train, a->common);
  add_model_flags(train, a->model);
  add_train_flags(train, a->train);
  add_decode_flags(train, a->decode);
  train->add_option("--split", a->split, "SCAN split")
      ->capture_default_str()
      ->check(CLI::IsMember({"simple", "length", "addprim_jump"}))
      ->group(kDataGroup);
  train->add_option("--tokens", a->tokens, "TSV data: tokens are words or chars")
      ->capture_default_str()
      ->check(CLI::IsMember({"words", "chars"}))
      ->group(kDataGroup);
  train->add_option("--decoder-mixer", a->decoder_mixer, "the decoder's causal self-mixer")
      ->capture_default_str()
      ->group(kModelGroup);
  train->add_option("--decoder-mixer-opt", a->decoder_options, "a decoder mixer option key=value")
      ->group(kModelGroup);
  train->add_option("--cross", a->cross, "the cross-mixer (dot-product attention)")
      ->capture_default_str()
      ->group(kModelGroup);
  train->add_flag("--tie-output", a->tie, "tie the output layer to the target embedding")
      ->group(kModelGroup);
  train->callback([a, train] {
    Device device = setup_runtime(a->common);
    check_before_training(*train, a->common, a->train);
    ModelConfig config;
    config.task = ModelTask::Translate;
    apply_model_flags(a->model, a->common.seed, config);
    config.decoder_mixer = a->decoder_mixer;
    config.decoder_mixer_options = parse_mixer_options(a->decoder_mixer, a->decoder_options);
    // Refused here, before any data is read, by the registry (MixerSpecError: exit 2).
    const MixerRegistry& reg = MixerRegistry::instance();
    reg.check_spec(a->decoder_mixer, config.decoder_mixer_options, /*causal=*/true, false);
    reg.check_spec(a->cross, {}, false, /*cross=*/true);
    config.cross = a->cross;
    config.tie_output = a->tie;
    const DataDescription desc = describe_data(a->common.data, a->split, a->tokens, a->common.seed);
    if (desc.kind == DataKind::G2p && !desc.path.empty())
      throw UsageError("--data g2p:" + desc.path +
                       ": a word list is for `translate eval`; train with --data g2p");
    TranslationData d = load_data(desc, std::max(kDataLengthCap, a->model.max_len));
    if (a->train.train_limit > 0 && a->train.train_limit < static_cast<int64_t>(d.train.size()))
      d.train.resize(a->train.train_limit);
    Vocab src = build_src_vocab(d.train), tgt = build_tgt_vocab(d.train);
    // +1 for <eos> on the source, +2 for <bos>/<eos> on the target; the test split may be longer.
    config.max_len =
        std::max({longest(d.train, true), longest(d.valid, true), longest(d.test, true)}) + 1;
    config.tgt_max_len =
        std::max({longest(d.train, false), longest(d.valid, false), longest(d.test, false)}) + 2;
    // A file's lines were measured as it was read (naming the line); the other sources here.
    const int64_t limit = std::max(kDataLengthCap, a->model.max_len);
    if (const int64_t n = std::max(config.max_len - 1, config.tgt_max_len - 2); n > limit)
      throw UsageError(d.description + ": the longest example has " + std::to_string(n) +
                       " tokens, more than " + std::to_string(limit) +
                       ", the longest a model takes its length from; pass --max-len " +
                       std::to_string(n) + " to train on it");
    if (a->model.max_len > 0) {
      config.max_len = std::max(config.max_len, a->model.max_len);
      config.tgt_max_len = std::max(config.tgt_max_len, a->model.max_len);
    }
    config.vocab = static_cast<int64_t>(src.size());
    config.tgt_vocab = static_cast<int64_t>(tgt.size());
    Translator model = build_model<Translator>(config);
    try {
      check_batch_size(config, a->train.trainer.batch_size);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    model.to(device);
    std::cerr << "data: " << d.description << ": " << d.train.size() << " train, " << d.valid.size()
              << " valid, " << d.test.size() << " test; vocab " << src.size() << " -> "
              << tgt.size() << "\n"
              << "model: " << config.mixer << " encoder, " << config.decoder_mixer << " decoder, "
              << model.parameter_count() << " parameters, on " << describe_device(device) << "\n";
    resume_schedule(*train, a->common, a->train);
    if (is_primary_process())  // [distributed] rank 0 alone owns the run folder
      open_run_folder(*train, a->common, a->train, config, d.desc.to_json().dump());
    InMemoryDataset train_set = encode_seq2seq(d.train, src, tgt);
    InMemoryDataset valid_set = encode_seq2seq(d.valid, src, tgt);
    TranslationTask task(model, device, a->train.label_smoothing,
                         decode_options(a->decode, config));
    if (!d.valid_refs.empty()) task.set_references(encode_refs(d.valid_refs, tgt));
    TrainingState meta;
    meta.config_json = config.to_json().dump();
    meta.vocab_src = src.to_string();
    meta.vocab_tgt = tgt.to_string();
    meta.extra["data"] = d.desc.to_json().dump();
    meta.extra["src_tokens"] = d.src_tokens;
    meta.extra["tgt_join"] = d.tgt_join;
    Trainer trainer(task, train_set, &valid_set, trainer_options(a->train, a->common), meta);
    TrainResult r = trainer.run();
    const std::string& out = a->common.out;
    const std::string mixlab = shell_quote(program_path());
    const std::string resume = mixlab + " translate train --resume --out " + shell_quote(out);
    if (r.interrupted) {
      print_where_and_next(std::cerr, out, {resume});
      throw Interrupted();
    }
    if (!is_primary_process()) return;  // [distributed] ranks > 0 stop after training
    int64_t scored_step = r.steps;      // the test row names the step of the model it scored
    if (!out.empty() && std::filesystem::exists(Trainer::best_checkpoint(out))) {
      load_weights(Trainer::best_checkpoint(out), model);
      if (r.best_step >= 0) scored_step = r.best_step;
    }
    auto test = test_and_show(task, d, src, tgt, 5);
    trainer.log_test(test, scored_step);
    print_summary(
        "translate: " + config.mixer + " / " + config.decoder_mixer + " on " + d.description,
        model.parameter_count(), r, test);
    if (out.empty()) return;
    const std::string best = shell_quote(Trainer::best_checkpoint(out));
    const std::string sample =
        d.test.empty() ? "..." : join(d.test[0].src, d.src_tokens == "chars" ? "" : " ");
    print_where_and_next(
        std::cout, out,
        {"echo " + shell_quote(sample) + " | " + mixlab + " translate run --checkpoint " + best,
         mixlab + " translate eval --checkpoint " + best + " --beam 4",
         mixlab + " --config " + shell_quote(out + "/config.ini") + " translate train --epochs " +
             std::to_string(a->train.trainer.epochs * 2) + " --out " +
             shell_quote(out + "-longer") + "   # the same run with twice the epochs, anew"});
  });

  struct EvalArgs {
    CommonFlags common;
    DecodeFlags decode;
    std::vector<std::string> checkpoints;
    std::string split, tokens, on = "test";
  };
  auto e = std::make_shared<EvalArgs>();
  CLI::App* eval = translate->add_subcommand(
      "eval", "score a checkpoint (or an ensemble) on the test or validation set");
  add_data_flags(eval, e->common,
                 "scan, g2p, g2p:WORD_LIST (words in g014b2b.ref's format, all scored) or a "
                 "source<TAB>target file (default: the checkpoint's)");
  add_runtime_flags(eval, e->common);
  add_decode_flags(eval, e->decode);
  eval->add_option("--checkpoint", e->checkpoints,
                   "a .safetensors checkpoint; several decode as an ensemble (the mean of their "
                   "next-token probabilities)")
      ->required()
      ->group(kModelGroup);
  eval->add_option("--split", e->split, "SCAN split (default: the checkpoint's)")
      ->check(CLI::IsMember({"simple", "length", "addprim_jump"}))
      ->group(kDataGroup);
  eval->add_option("--tokens", e->tokens, "TSV data: words or chars (default: the checkpoint's)")
      ->check(CLI::IsMember({"words", "chars"}))
      ->group(kDataGroup);
  eval->add_option("--on", e->on,
                   "score the test set, or the validation set held out from train (for choosing "
                   "a checkpoint; g2p's dev set is fixed, scan's and a file's follow --seed)")
      ->check(CLI::IsMember({"test", "valid"}))
      ->capture_default_str()
      ->group(kDataGroup);
  eval->callback([e, eval] {
    Device device = setup_runtime(e->common);
    std::vector<Loaded> models = load_models(e->checkpoints, device);
    Loaded& l = models[0];
    // The checkpoint's data unless --data names other data; its split, tokens and seed unless
    // given.
    DataDescription stored = read_data_description(l.info.extra["data"]);
    uint64_t seed = eval->get_option("--seed")->count() ? e->common.seed : stored.seed;
    DataDescription desc = stored;
    if (!e->common.data.empty() || !e->split.empty() || !e->tokens.empty() ||
        eval->get_option("--seed")->count()) {
      std::string data = e->common.data.empty()
                             ? (stored.path.empty()            ? to_string(stored.kind)
                                : stored.kind == DataKind::G2p ? "g2p:" + stored.path
                                                               : stored.path)
                             : e->common.data;
      std::string split = !e->split.empty()       ? e->split
                          : !stored.split.empty() ? stored.split
                                                  : "simple";
      std::string tokens = !e->tokens.empty()       ? e->tokens
                           : !stored.tokens.empty() ? stored.tokens
                                                    : "words";
      desc = describe_data(data, split, tokens, seed);
    }
    std::cerr << "data: " << desc.summary() << (desc == stored ? ", the checkpoint's" : "") << "\n";
    // Lines as long as the model takes are read; the check below refuses longer ones.
    TranslationData d = load_data(
        desc, std::max({kDataLengthCap, l.info.config.max_len, l.info.config.tgt_max_len}));
    if (e->on == "valid") {  // score the held-out set through the same path as the test set
      d.test = std::move(d.valid);
      d.test_refs = std::move(d.valid_refs);
    }
    UnknownTokens unknown;
    int64_t tokens = 0, longest_src = 0, longest_tgt = 0;
    for (const auto& p : d.test) {
      unknown.add(p.src, l.src);
      unknown.add(p.tgt, l.tgt);
      tokens += static_cast<int64_t>(p.src.size() + p.tgt.size());
      longest_src = std::max<int64_t>(longest_src, static_cast<int64_t>(p.src.size()) + 1);
      longest_tgt = std::max<int64_t>(longest_tgt, static_cast<int64_t>(p.tgt.size()) + 2);
    }
    // +1 for <eos> on the source, +2 for <bos>/<eos> on the target, as in training.
    const std::string ck = e->checkpoints.front();
    check_data_fits_checkpoint(ck, stored.summary(), desc.summary(), unknown.total(), tokens,
                               longest_src, l.info.config.max_len);
    check_data_fits_checkpoint(ck, stored.summary(), desc.summary(), 0, 0, longest_tgt,
                               l.info.config.tgt_max_len);
    unknown.report(std::cerr);
    TranslationTask task(*l.model, device, 0.0, decode_options(e->decode, l.info.config));
    task.set_ensemble(others(models));
    task.set_progress(&std::cerr);
    for (const auto& [k, v] : test_and_show(task, d, l.src, l.tgt, 5))
      std::cout << e->on << " " << k << " " << v << "\n";
  });

  struct RunArgs {
    CommonFlags common;
    DecodeFlags decode;
    std::vector<std::string> checkpoints;
  };
  auto r = std::make_shared<RunArgs>();
  CLI::App* run = translate->add_subcommand("run", "translate lines from stdin to stdout");
  add_runtime_flags(run, r->common);
  add_decode_flags(run, r->decode);
  run->add_option("--checkpoint", r->checkpoints,
                  "a .safetensors checkpoint; several decode as an ensemble")
      ->required()
      ->group(kModelGroup);
  run->callback([r] {
    Device device = setup_runtime(r->common);
    std::vector<Loaded> loaded = load_models(r->checkpoints, device);
    Loaded& l = loaded[0];
    std::vector<Translator*> models{l.model.get()};
    for (Translator* m : others(loaded)) models.push_back(m);
    int64_t max_len = l.info.config.max_len;
    for (const Loaded& m : loaded) max_len = std::min(max_len, m.info.config.max_len);
    std::string kind = l.info.extra.count("src_tokens") ? l.info.extra["src_tokens"] : "words";
    std::string sep = l.info.extra.count("tgt_join") ? l.info.extra["tgt_join"] : " ";
    DecodeOptions o = decode_options(r->decode, l.info.config);
    std::cerr << "data: " << read_data_description(l.info.extra["data"]).summary() << "; "
              << l.src.size() << " source tokens\n";
    // On a terminal, a prompt before each line.
    const bool terminal = ::isatty(STDIN_FILENO) && ::isatty(STDERR_FILENO);
    auto prompt = [&] {
      if (terminal) std::cerr << "> " << std::flush;
    };
    if (terminal) std::cerr << "one line to translate at a time (Ctrl-D ends)\n";
    prompt();
    for (std::string line; std::getline(std::cin, line); prompt()) {
      std::vector<std::string> tokens = tokenize(line, kind);
      UnknownTokens unknown;
      unknown.add(tokens, l.src);
      unknown.report(std::cerr);
      std::vector<int32_t> ids = l.src.encode(tokens, false, true);
      if (static_cast<int64_t>(ids.size()) > max_len) {
        std::cerr << "warning: input of " << ids.size() << " tokens is longer than max_len "
                  << max_len << "; skipped\n";
        std::cout << "\n";
        continue;
      }
      int64_t n = static_cast<int64_t>(ids.size());
      Tensor src = Tensor::from_data(ids, {1, n}, device);
      auto out = generate_ensemble(models, src, {static_cast<int32_t>(n)}, o);
      std::cout << join(l.tgt.decode(out[0]), sep) << "\n" << std::flush;
      check_stdout();
    }
  });
}

}  // namespace mixlab::app
