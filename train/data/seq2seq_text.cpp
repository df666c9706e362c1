#include "train/data/seq2seq_text.h"

namespace mixlab {

Vocab build_src_vocab(const std::vector<Seq2SeqText>& pairs, int64_t min_count) {
  std::vector<std::vector<std::string>> sides;
  sides.reserve(pairs.size());
  for (const Seq2SeqText& pair : pairs) sides.push_back(pair.src);
  return Vocab::build(sides, min_count);
}

Vocab build_tgt_vocab(const std::vector<Seq2SeqText>& pairs, int64_t min_count) {
  std::vector<std::vector<std::string>> sides;
  sides.reserve(pairs.size());
  for (const Seq2SeqText& pair : pairs) sides.push_back(pair.tgt);
  return Vocab::build(sides, min_count);
}

InMemoryDataset encode_seq2seq(const std::vector<Seq2SeqText>& pairs, const Vocab& src_vocab,
                               const Vocab& tgt_vocab, const Seq2SeqEncoding& encoding) {
  std::vector<Example> examples(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    examples[i].src = src_vocab.encode(pairs[i].src, encoding.src_bos, encoding.src_eos);
    examples[i].tgt = tgt_vocab.encode(pairs[i].tgt, encoding.tgt_bos, encoding.tgt_eos);
  }
  return InMemoryDataset(std::move(examples));
}

InMemoryDataset encode_labelled(const std::vector<LabelledTokens>& labelled, const Vocab& vocab,
                                bool add_bos, bool add_eos) {
  std::vector<Example> examples(labelled.size());
  for (size_t i = 0; i < labelled.size(); ++i) {
    examples[i].src = vocab.encode(labelled[i].tokens, add_bos, add_eos);
    examples[i].label = labelled[i].label;
  }
  return InMemoryDataset(std::move(examples));
}

}  // namespace mixlab
