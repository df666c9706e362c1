#include "train/data/text_files.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "train/data/file_io.h"
#include "train/data/vocab.h"

namespace mixlab {

namespace {

std::vector<std::string> tokenize(std::string_view text, Tokenization tokenization) {
  const std::string owned(text);
  return tokenization == Tokenization::kChars ? tokenize_chars(owned) : tokenize_words(owned);
}

// The longest example of a file as it is read; refuse() after the whole file, so that the
// message names the longest line rather than the first that is too long.
struct LongestLine {
  size_t tokens = 0, line = 0;
  void see(size_t n, size_t at) {
    if (n > tokens) tokens = n, line = at;
  }
  void refuse_above(int64_t max_tokens, const std::string& path) const {
    if (static_cast<int64_t>(tokens) <= max_tokens) return;
    fail(path, ":", line, ": the longest example has ", tokens, " tokens, more than ", max_tokens,
         ", the longest a model takes its length from; pass --max-len ", tokens, " to train on it");
  }
};

}  // namespace

std::vector<Seq2SeqText> read_parallel_tsv(const std::string& path, Tokenization tokenization,
                                           int64_t max_tokens) {
  const std::string text = read_text_file(path);
  std::vector<Seq2SeqText> pairs;
  LongestLine longest;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t line = i + 1;
    const std::string_view content = lines[i];
    if (trim(content).empty()) continue;
    const size_t tab = content.find('\t');
    check(tab != std::string_view::npos, path, ":", line, ": no tab; expected 'source<TAB>target'");
    check(content.find('\t', tab + 1) == std::string_view::npos, path, ":", line,
          ": more than one tab; expected 'source<TAB>target'");
    Seq2SeqText pair{tokenize(content.substr(0, tab), tokenization),
                     tokenize(content.substr(tab + 1), tokenization)};
    check(!pair.src.empty(), path, ":", line, ": empty source");
    check(!pair.tgt.empty(), path, ":", line, ": empty target");
    longest.see(std::max(pair.src.size(), pair.tgt.size()), line);
    pairs.push_back(std::move(pair));
  }
  longest.refuse_above(max_tokens, path);
  return pairs;
}

std::vector<LabelledText> read_labelled_text(const std::string& path, Tokenization tokenization,
                                             int64_t max_tokens) {
  const std::string text = read_text_file(path);
  std::vector<LabelledText> texts;
  LongestLine longest;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t line = i + 1;
    const std::string_view content = lines[i];
    if (trim(content).empty()) continue;
    const size_t tab = content.find('\t');
    check(tab != std::string_view::npos, path, ":", line, ": no tab; expected 'label<TAB>text'");
    LabelledText example{std::string(trim(content.substr(0, tab))),
                         tokenize(content.substr(tab + 1), tokenization)};
    check(!example.label.empty(), path, ":", line, ": empty label");
    check(!example.tokens.empty(), path, ":", line, ": empty text");
    longest.see(example.tokens.size(), line);
    texts.push_back(std::move(example));
  }
  longest.refuse_above(max_tokens, path);
  return texts;
}

std::vector<std::string> label_names(const std::vector<LabelledText>& texts) {
  std::set<std::string> names;
  for (const LabelledText& t : texts) names.insert(t.label);
  return {names.begin(), names.end()};
}

std::vector<LabelledTokens> number_labels(const std::vector<LabelledText>& texts,
                                          const std::vector<std::string>& names) {
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < names.size(); ++i) ids.emplace(names[i], static_cast<int32_t>(i));
  std::vector<LabelledTokens> numbered;
  numbered.reserve(texts.size());
  for (const LabelledText& t : texts) {
    auto found = ids.find(t.label);
    check(found != ids.end(), "number_labels: label '", t.label, "' is not among the ",
          names.size(), " known labels");
    numbered.push_back({t.tokens, found->second});
  }
  return numbered;
}

}  // namespace mixlab
