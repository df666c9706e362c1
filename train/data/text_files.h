// Readers for small text corpora in tab-separated form:
//   parallel corpus:  source<TAB>target        per line (translation pairs)
//   labelled text:    label<TAB>text           per line (text classification)
// Files may be gzip-compressed or plain (file_io.h); a trailing '\r' is dropped. Blank lines
// (empty or only whitespace) are skipped, so a file may end with empty lines or separate blocks.
// Any other malformed line throws Error "FILE:LINE: ...".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/seq2seq_text.h"

namespace mixlab {

// The longest example, in tokens, that a model sizes its max_len to from the data unless told
// otherwise (--max-len raises it). A longer line is more often a mistake (a file without line
// breaks) than data, and its length would size the position table and every padded batch.
inline constexpr int64_t kDataLengthCap = 4096;

enum class Tokenization {
  kWords,  // tokenize_words: split on whitespace
  kChars,  // tokenize_chars: one token per character, spaces included
};

// Each line must hold exactly one tab, with a non-empty source and target (after
// tokenization; under kWords a side of only spaces counts as empty). A file whose longest side
// has more than `max_tokens` tokens is refused, naming the line of the longest.
std::vector<Seq2SeqText> read_parallel_tsv(const std::string& path,
                                           Tokenization tokenization = Tokenization::kWords,
                                           int64_t max_tokens = kDataLengthCap);

// A text-classification example before labels are numbered.
struct LabelledText {
  std::string label;
  std::vector<std::string> tokens;
  bool operator==(const LabelledText&) const = default;
};

// The label is everything before the first tab, trimmed, and must be non-empty; the text is the
// rest of the line (later tabs included) and must yield at least one token. A file whose
// longest text has more than `max_tokens` tokens is refused, naming the line of the longest.
std::vector<LabelledText> read_labelled_text(const std::string& path,
                                             Tokenization tokenization = Tokenization::kWords,
                                             int64_t max_tokens = kDataLengthCap);

// The distinct labels, sorted: the class id of a label is its index here.
std::vector<std::string> label_names(const std::vector<LabelledText>& texts);

// Numbers the labels by their index in `names` (e.g. label_names of the training file, so that
// dev and test use the same ids). A label missing from `names` throws Error.
std::vector<LabelledTokens> number_labels(const std::vector<LabelledText>& texts,
                                          const std::vector<std::string>& names);

}  // namespace mixlab
