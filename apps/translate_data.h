// What `mixlab translate train|eval|run` share: the data (SCAN, CMUdict G2P, source<TAB>target
// files), the decoding flags, translators rebuilt from checkpoints (several: an ensemble), and
// the test set scored with a few sample translations shown.
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "apps/common.h"
#include "apps/data_description.h"
#include "apps/eval_command.h"
#include "train/data/seq2seq_text.h"
#include "train/data/text_files.h"
#include "train/loop/tasks.h"

namespace mixlab::app {

struct TranslationData {
  std::vector<Seq2SeqText> train, valid, test;
  // Several references per example (g2p), as token strings; empty when one reference each.
  std::vector<std::vector<std::vector<std::string>>> valid_refs, test_refs;
  std::string tgt_join = " ";  // how output tokens are joined when printed
  std::string src_tokens = "words";
  DataDescription desc;
  std::string description;  // desc.summary()
};

// The data the flags name (usage errors for values outside the closed sets). Default: SCAN.
DataDescription describe_translate_data(const std::string& name, const std::string& split,
                                        const std::string& tokens, uint64_t seed);
TranslationData load_translate_data(const DataDescription& desc,
                                    int64_t max_tokens = kDataLengthCap);

// Sequence-level distillation (Kim & Rush 2016): the g2p training words' targets become the
// pronunciations FILE gives them ("WORD<TAB>PH1 PH2 ...", g014b2b.train's format: a teacher's
// `translate run` output pasted beside its input words). Every training word needs a line;
// lines of other words (dev or test words, say) are not used, and their count is returned. The
// validation and test sets keep the dictionary's references. Records FILE in data.desc.
int64_t replace_g2p_train_targets(TranslationData& data, const std::string& file);

// The references as token ids of `vocab`.
std::vector<std::vector<std::vector<int32_t>>> encode_refs(
    const std::vector<std::vector<std::vector<std::string>>>& refs, const Vocab& vocab);

// The most tokens of a source (`src`) or target side.
int64_t longest_side(const std::vector<Seq2SeqText>& pairs, bool src);

// A line split as the data's source side was: "chars" or "words".
std::vector<std::string> tokenize_line(const std::string& line, const std::string& kind);

struct DecodeFlags {
  int64_t beam = 1;
  double length_penalty = 1.0;
  int64_t max_output = 0;  // 0: the model's target max_len - 1
};
void add_decode_flags(CLI::App* cmd, DecodeFlags& f);
DecodeOptions decode_options(const DecodeFlags& f, const ModelConfig& c);

struct LoadedTranslator : LoadedModel<Translator> {
  Vocab src, tgt;
};
// Several checkpoints decode as an ensemble; they must agree on both vocabularies.
std::vector<LoadedTranslator> load_translators(const std::vector<std::string>& checkpoints,
                                               Device device);

// Evaluates on a test set and prints metrics and a few samples next to their references.
std::map<std::string, double> test_and_show(TranslationTask& task, const TranslationData& d,
                                            const Vocab& src, const Vocab& tgt, int samples);

}  // namespace mixlab::app
