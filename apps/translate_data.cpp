// The translation data, decoding flags and checkpoint loading behind `mixlab translate`
// (apps/translate_data.h).
#include "apps/translate_data.h"

#include <filesystem>
#include <iostream>
#include <unordered_map>
#include <unordered_set>

#include "core/random.h"
#include "core/strings.h"
#include "train/data/cmudict.h"
#include "train/data/scan.h"
#include "train/data/vocab.h"
#include "train/run/summary.h"

namespace mixlab::app {

namespace {

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

std::string clip_text(const std::string& s, size_t width = 48) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

LoadedTranslator load_translator(const std::string& checkpoint, Device device) {
  LoadedTranslator l;
  static_cast<LoadedModel<Translator>&>(l) = load_trained_model<Translator>(checkpoint, device);
  l.src = Vocab::from_string(l.info.vocab_src);
  l.tgt = Vocab::from_string(l.info.vocab_tgt);
  return l;
}

}  // namespace

DataDescription describe_translate_data(const std::string& name_in, const std::string& split,
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

TranslationData load_translate_data(const DataDescription& desc, int64_t max_tokens) {
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

int64_t replace_g2p_train_targets(TranslationData& data, const std::string& file) {
  if (data.desc.kind != DataKind::G2p || !data.desc.path.empty())
    throw UsageError("--train-targets is for --data g2p (the g014b2b training words)");
  if (!std::filesystem::is_regular_file(file))
    throw UsageError("--train-targets: " + file + " is not a file");
  std::unordered_map<std::string, const G2PEntry*> given;
  const std::vector<G2PEntry> entries = read_g2p_train(file);  // names FILE:LINE when malformed
  for (const G2PEntry& e : entries) given.emplace(e.word, &e);
  // The training words, in the order of the training pairs (a word's pronunciations adjacent).
  std::vector<G2PEntry> train;
  std::unordered_set<std::string> seen;
  for (const Seq2SeqText& pair : data.train) {
    std::string word;
    for (const std::string& ch : pair.src) word += ch;
    if (!seen.insert(word).second) continue;
    auto it = given.find(word);
    if (it == given.end())
      throw UsageError("--train-targets " + file + " has no line for the training word '" + word +
                       "' (every training word needs one)");
    train.push_back(*it->second);
  }
  const int64_t unused = static_cast<int64_t>(entries.size() - train.size());
  data.train = g2p_pairs(train);
  data.desc.train_targets = absolute_path(file);
  data.description = data.desc.summary();
  return unused;
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

int64_t longest_side(const std::vector<Seq2SeqText>& pairs, bool src) {
  size_t n = 0;
  for (const auto& p : pairs) n = std::max(n, (src ? p.src : p.tgt).size());
  return static_cast<int64_t>(n);
}

std::vector<std::string> tokenize_line(const std::string& line, const std::string& kind) {
  return kind == "chars" ? tokenize_chars(line) : tokenize_words(line);
}

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

std::vector<LoadedTranslator> load_translators(const std::vector<std::string>& checkpoints,
                                               Device device) {
  std::vector<LoadedTranslator> out;
  for (const auto& c : checkpoints) {
    out.push_back(load_translator(c, device));
    const LoadedTranslator& l = out.back();
    if (l.src.to_string() != out[0].src.to_string() || l.tgt.to_string() != out[0].tgt.to_string())
      throw UsageError("--checkpoint " + c + " has other vocabularies than " + checkpoints[0] +
                       "; an ensemble needs models trained on the same data");
  }
  return out;
}

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

}  // namespace mixlab::app
