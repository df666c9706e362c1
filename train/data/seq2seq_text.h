// Text-level examples, before a vocabulary turns them into ids: what the SCAN generator, the G2P
// reader and the TSV readers produce, and the one place that turns them into an InMemoryDataset.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/dataset.h"
#include "train/data/vocab.h"

namespace mixlab {

// A source/target pair of token lists (SCAN command/actions, word graphemes/phonemes, ...).
struct Seq2SeqText {
  std::vector<std::string> src;
  std::vector<std::string> tgt;
  bool operator==(const Seq2SeqText&) const = default;
};

// A token list with a class label (ListOps expressions, labelled text).
struct LabelledTokens {
  std::vector<std::string> tokens;
  int32_t label = -1;
  bool operator==(const LabelledTokens&) const = default;
};

// Which specials to wrap around each side. The defaults suit an encoder-decoder: the source ends
// in <eos>, the target is <bos> ... <eos> (the trainer shifts it for teacher forcing).
struct Seq2SeqEncoding {
  bool src_bos = false;
  bool src_eos = true;
  bool tgt_bos = true;
  bool tgt_eos = true;
};

// Builds source and target vocabularies from the pairs (sorted, see Vocab::build).
Vocab build_src_vocab(const std::vector<Seq2SeqText>& pairs, int64_t min_count = 1);
Vocab build_tgt_vocab(const std::vector<Seq2SeqText>& pairs, int64_t min_count = 1);

// Examples with `src` and `tgt` filled with ids, in the order of `pairs`.
InMemoryDataset encode_seq2seq(const std::vector<Seq2SeqText>& pairs, const Vocab& src_vocab,
                               const Vocab& tgt_vocab, const Seq2SeqEncoding& encoding = {});

// Examples with `src` (ids, no specials added unless asked) and `label`, in order.
InMemoryDataset encode_labelled(const std::vector<LabelledTokens>& examples, const Vocab& vocab,
                                bool add_bos = false, bool add_eos = false);

}  // namespace mixlab
