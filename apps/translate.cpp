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

#include "apps/commands.h"
#include "apps/common.h"
#include "autograd/grad_mode.h"
#include "core/random.h"
#include "nn/mixer_registry.h"
#include "train/data/cmudict.h"
#include "train/data/scan.h"
#include "train/data/seq2seq_text.h"
#include "train/data/text_files.h"
#include "train/distributed.h"
#include "train/summary.h"
#include "train/vocab.h"

namespace mixlab::app {

namespace {

struct TranslationData {
  std::vector<Seq2SeqText> train, valid, test;
  // Several references per example (g2p), as token strings; empty when one reference each.
  std::vector<std::vector<std::vector<std::string>>> valid_refs, test_refs;
  std::string tgt_join = " ";  // how output tokens are joined when printed
  std::string src_tokens = "words";
  std::string description;
};

// Moves a seeded `fraction` of `pool` into `held` (order otherwise kept).
void hold_out(std::vector<Seq2SeqText>& pool, std::vector<Seq2SeqText>& held, double fraction,
              uint64_t seed) {
  Generator gen(seed ^ 0x5eedull);
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

TranslationData load_data(const std::string& name_in, const std::string& split,
                          const std::string& tokens, uint64_t seed) {
  std::string name = name_in.empty() ? "scan" : name_in;
  TranslationData d;
  if (name == "scan") {
    ScanSplit s;
    try {
      s = scan_split(split, seed);
    } catch (const Error& e) {
      throw UsageError(std::string("--split: ") + e.what());
    }
    d.train = std::move(s.train);
    d.test = std::move(s.test);
    hold_out(d.train, d.valid, 0.05, seed);
    d.description = "SCAN " + split + " split";
  } else if (name == "g2p") {
    // The dev words do not follow --seed: runs with other seeds are chosen on (and can be
    // ensembled over) the same 2,670 held-out words. Seed 0 gives the split earlier runs used.
    G2PData g = load_g2p(default_g2p_dir(), 2670, /*seed=*/0);
    d.train = g2p_pairs(g.train);
    g2p_side(g.dev, d.valid, d.valid_refs);
    g2p_side(g.test, d.test, d.test_refs);
    d.src_tokens = "chars";
    d.description = "CMUdict g014b2b (" + default_g2p_dir() + ")";
  } else if (std::filesystem::is_regular_file(name)) {
    bool chars = tokens == "chars";
    if (!chars && tokens != "words") throw UsageError("--tokens must be words or chars");
    d.train = read_parallel_tsv(name, chars ? Tokenization::kChars : Tokenization::kWords);
    size_t hold = std::max<size_t>(1, d.train.size() / 10);
    check(d.train.size() > hold, name, ": too few pairs to hold out a validation set");
    d.valid.assign(d.train.end() - hold, d.train.end());
    d.train.resize(d.train.size() - hold);
    d.test = d.valid;
    d.src_tokens = tokens;
    if (chars) d.tgt_join = "";
    d.description = "parallel text " + name;
  } else {
    throw UsageError("--data '" + name + "': expected scan, g2p or a source<TAB>target file");
  }
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

std::string join(const std::vector<std::string>& tokens, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) out += (i ? sep : "") + tokens[i];
  return out;
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
  cmd->add_option("--beam", f.beam, "beam width (1: greedy)")->capture_default_str();
  cmd->add_option("--length-penalty", f.length_penalty, "beam length penalty alpha (0: off)")
      ->capture_default_str();
  cmd->add_option("--max-output", f.max_output, "longest output (0: the model's limit)")
      ->capture_default_str();
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
  train->add_option("--split", a->split, "SCAN split: simple, length or addprim_jump")
      ->capture_default_str();
  train->add_option("--tokens", a->tokens, "TSV data: words or chars")->capture_default_str();
  train->add_option("--decoder-mixer", a->decoder_mixer, "the decoder's causal self-mixer")
      ->capture_default_str();
  train->add_option("--decoder-mixer-opt", a->decoder_options, "a decoder mixer option key=value");
  train->add_option("--cross", a->cross, "the cross-mixer (dot-product attention)")
      ->capture_default_str();
  train->add_flag("--tie-output", a->tie, "tie the output layer to the target embedding");
  train->callback([a, train] {
    Device device = setup_runtime(a->common);
    ModelConfig config;
    config.task = "translate";
    apply_model_flags(a->model, a->common.seed, config);
    config.decoder_mixer = a->decoder_mixer;
    config.decoder_mixer_options = parse_mixer_options(a->decoder_mixer, a->decoder_options);
    const MixerRegistry& reg = MixerRegistry::instance();
    if (!reg.find(a->decoder_mixer).capabilities.causal) {
      std::string names;
      for (const auto& n : reg.causal_names()) names += (names.empty() ? "" : ", ") + n;
      throw UsageError("--decoder-mixer " + a->decoder_mixer + " cannot be causal: " +
                       reg.find(a->decoder_mixer).capabilities.causal_refusal +
                       " Mixers that support causal use: " + names);
    }
    if (!reg.contains(a->cross) || !reg.find(a->cross).capabilities.cross)
      throw UsageError("--cross " + a->cross +
                       ": only dot-product attention can attend to the "
                       "encoder (the synthetic mixers cannot replace cross-attention)");
    config.cross = a->cross;
    config.tie_output = a->tie;
    TranslationData d = load_data(a->common.data, a->split, a->tokens, a->common.seed);
    if (a->train.train_limit > 0 && a->train.train_limit < static_cast<int64_t>(d.train.size()))
      d.train.resize(a->train.train_limit);
    Vocab src = build_src_vocab(d.train), tgt = build_tgt_vocab(d.train);
    // +1 for <eos> on the source, +2 for <bos>/<eos> on the target; the test split may be longer.
    config.max_len =
        std::max({longest(d.train, true), longest(d.valid, true), longest(d.test, true)}) + 1;
    config.tgt_max_len =
        std::max({longest(d.train, false), longest(d.valid, false), longest(d.test, false)}) + 2;
    if (a->model.max_len > 0) {
      config.max_len = std::max(config.max_len, a->model.max_len);
      config.tgt_max_len = std::max(config.tgt_max_len, a->model.max_len);
    }
    config.vocab = static_cast<int64_t>(src.size());
    config.tgt_vocab = static_cast<int64_t>(tgt.size());
    Translator model(config);
    model.to(device);
    std::cerr << "data: " << d.description << ": " << d.train.size() << " train, " << d.valid.size()
              << " valid, " << d.test.size() << " test; vocab " << src.size() << " -> "
              << tgt.size() << "\n"
              << "model: " << config.mixer << " encoder, " << config.decoder_mixer << " decoder, "
              << model.parameter_count() << " parameters\n";
    save_run_config(*train, config, a->common.out);
    InMemoryDataset train_set = encode_seq2seq(d.train, src, tgt);
    InMemoryDataset valid_set = encode_seq2seq(d.valid, src, tgt);
    TranslationTask task(model, device, a->train.label_smoothing,
                         decode_options(a->decode, config));
    if (!d.valid_refs.empty()) task.set_references(encode_refs(d.valid_refs, tgt));
    TrainingState meta;
    meta.config_json = config.to_json().dump();
    meta.vocab_src = src.to_string();
    meta.vocab_tgt = tgt.to_string();
    meta.extra["data"] = d.description;
    meta.extra["src_tokens"] = d.src_tokens;
    meta.extra["tgt_join"] = d.tgt_join;
    Trainer trainer(task, train_set, &valid_set, trainer_options(a->train, a->common), meta);
    TrainResult r = trainer.run();
    if (r.interrupted) throw Interrupted();
    if (!is_primary_process()) return;  // [distributed] ranks > 0 stop after training
    if (!a->common.out.empty() && std::filesystem::exists(Trainer::best_checkpoint(a->common.out)))
      load_weights(Trainer::best_checkpoint(a->common.out), model);
    auto test = test_and_show(task, d, src, tgt, 5);
    print_summary(
        "translate: " + config.mixer + " / " + config.decoder_mixer + " on " + d.description,
        model.parameter_count(), r, test);
  });

  struct EvalArgs {
    CommonFlags common;
    DecodeFlags decode;
    std::vector<std::string> checkpoints;
    std::string split = "simple", tokens = "words", on = "test";
  };
  auto e = std::make_shared<EvalArgs>();
  CLI::App* eval = translate->add_subcommand(
      "eval", "score a checkpoint (or an ensemble) on the test or validation set");
  add_common_flags(eval, e->common);
  add_decode_flags(eval, e->decode);
  eval->add_option("--checkpoint", e->checkpoints,
                   "a .safetensors checkpoint; several decode as an ensemble (the mean of their "
                   "next-token probabilities)")
      ->required();
  eval->add_option("--split", e->split, "SCAN split")->capture_default_str();
  eval->add_option("--tokens", e->tokens, "TSV data: words or chars")->capture_default_str();
  eval->add_option("--on", e->on,
                   "score the test set, or the validation set held out from train (for choosing "
                   "a checkpoint; g2p's dev set is fixed, scan's and a file's follow --seed)")
      ->check(CLI::IsMember({"test", "valid"}))
      ->capture_default_str();
  eval->callback([e] {
    Device device = setup_runtime(e->common);
    std::vector<Loaded> models = load_models(e->checkpoints, device);
    Loaded& l = models[0];
    std::string data = e->common.data;
    if (data.empty()) {
      const std::string& saved = l.info.extra["data"];
      data = saved.rfind("CMUdict", 0) == 0 ? "g2p" : "scan";
    }
    TranslationData d = load_data(data, e->split, e->tokens, e->common.seed);
    if (e->on == "valid") {  // score the held-out set through the same path as the test set
      d.test = std::move(d.valid);
      d.test_refs = std::move(d.valid_refs);
    }
    TranslationTask task(*l.model, device, 0.0, decode_options(e->decode, l.info.config));
    task.set_ensemble(others(models));
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
  add_common_flags(run, r->common);
  add_decode_flags(run, r->decode);
  run->add_option("--checkpoint", r->checkpoints,
                  "a .safetensors checkpoint; several decode as an ensemble")
      ->required();
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
    for (std::string line; std::getline(std::cin, line);) {
      std::vector<int32_t> ids = l.src.encode(tokenize(line, kind), false, true);
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
    }
  });
}

}  // namespace mixlab::app
