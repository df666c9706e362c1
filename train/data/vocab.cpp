#include "train/data/vocab.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "train/data/file_io.h"

namespace mixlab {

const std::vector<std::string>& special_tokens() {
  static const std::vector<std::string> specials = {"<pad>", "<bos>", "<eos>", "<unk>"};
  return specials;
}

Vocab::Vocab() {
  for (const std::string& special : special_tokens()) add(special);
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& sequences, int64_t min_count) {
  check(min_count >= 1, "Vocab::build: min_count must be at least 1, got ", min_count);
  // std::map keeps the tokens sorted, which is the documented order.
  std::map<std::string, int64_t> counts;
  for (const auto& sequence : sequences) {
    for (const std::string& token : sequence) ++counts[token];
  }
  Vocab vocab;
  for (const auto& [token, count] : counts) {
    if (count >= min_count) vocab.add(token);
  }
  return vocab;
}

int32_t Vocab::add(const std::string& token) {
  auto found = ids_.find(token);
  if (found != ids_.end()) return found->second;
  check(!token.empty(), "Vocab::add: empty token");
  check(token.find('\n') == std::string::npos, "Vocab::add: token contains a newline");
  const auto new_id = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
  ids_.emplace(token, new_id);
  return new_id;
}

int32_t Vocab::id(const std::string& token) const {
  auto found = ids_.find(token);
  return found == ids_.end() ? kUnk : found->second;
}

const std::string& Vocab::token(int32_t id) const {
  check(id >= 0 && static_cast<size_t>(id) < tokens_.size(), "Vocab::token: id ", id,
        " out of range for a vocabulary of ", tokens_.size());
  return tokens_[static_cast<size_t>(id)];
}

std::vector<int32_t> Vocab::encode(const std::vector<std::string>& tokens, bool add_bos,
                                   bool add_eos) const {
  std::vector<int32_t> ids;
  ids.reserve(tokens.size() + 2);
  if (add_bos) ids.push_back(kBos);
  for (const std::string& t : tokens) ids.push_back(id(t));
  if (add_eos) ids.push_back(kEos);
  return ids;
}

std::vector<std::string> Vocab::decode(const std::vector<int32_t>& ids, bool strip_specials) const {
  std::vector<std::string> tokens;
  for (int32_t i : ids) {
    const std::string& t = token(i);  // validates the id
    const bool is_eos = i == kEos;
    if (!(strip_specials && (i == kPad || i == kBos || is_eos))) tokens.push_back(t);
    if (is_eos) break;
  }
  return tokens;
}

std::string Vocab::to_string() const {
  std::string text;
  for (const std::string& t : tokens_) {
    text += t;
    text += '\n';
  }
  return text;
}

Vocab Vocab::from_string(const std::string& text) {
  const std::vector<std::string_view> lines = split_lines(text);
  const auto& specials = special_tokens();
  check(lines.size() >= specials.size(), "Vocab::from_string: ", lines.size(),
        " lines, but a vocabulary starts with the ", specials.size(), " special tokens");
  Vocab vocab;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string token(lines[i]);
    if (i < specials.size()) {
      check(token == specials[i], "Vocab::from_string: line ", i + 1, " is '", token,
            "', expected the special token '", specials[i], "'");
      continue;
    }
    check(!token.empty(), "Vocab::from_string: line ", i + 1, " is empty");
    check(!vocab.contains(token), "Vocab::from_string: line ", i + 1, ": token '", token,
          "' appears twice");
    vocab.add(token);
  }
  return vocab;
}

std::vector<std::string> tokenize_chars(const std::string& text) {
  std::vector<std::string> tokens;
  tokens.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    if (lead >= 0xC0 && lead < 0xE0) {
      length = 2;
    } else if (lead >= 0xE0 && lead < 0xF0) {
      length = 3;
    } else if (lead >= 0xF0 && lead < 0xF8) {
      length = 4;
    }
    // A sequence cut short or with a bad continuation byte is taken one byte at a time.
    bool valid = i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (!valid) length = 1;
    tokens.push_back(text.substr(i, length));
    i += length;
  }
  return tokens;
}

std::vector<std::string> tokenize_words(const std::string& text) {
  std::vector<std::string> tokens;
  for (std::string_view piece : split_whitespace(text)) tokens.emplace_back(piece);
  return tokens;
}

}  // namespace mixlab
