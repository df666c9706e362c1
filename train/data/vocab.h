// Token <-> id mapping for sequence tasks, and the two tokenizers the data readers use.
//
// Ids 0..3 are the specials <pad>, <bos>, <eos>, <unk> in that order (the loader pads with
// Vocab::kPad, decoders stop at Vocab::kEos). Ordinary tokens follow. Vocab::build sorts them by
// byte order (std::string's operator<), so a vocabulary depends only on the set of tokens kept,
// never on the order in which the data happened to list them; Vocab::add appends, for callers
// that need a fixed order of their own (e.g. ListOps).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace mixlab {

class Vocab {
 public:
  static constexpr int32_t kPad = 0;
  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;
  static constexpr int32_t kUnk = 3;
  static constexpr int32_t kNumSpecials = 4;

  // The four specials only.
  Vocab();

  // Every token seen at least `min_count` times in `sequences`, sorted (see above). Tokens that
  // spell a special (e.g. "<unk>") map to that special rather than being added twice.
  static Vocab build(const std::vector<std::vector<std::string>>& sequences, int64_t min_count = 1);

  // Appends `token` unless present; returns its id. Tokens must be non-empty and contain no
  // newline, so that to_string() can store one per line.
  int32_t add(const std::string& token);

  bool contains(const std::string& token) const { return ids_.count(token) != 0; }
  // The id of `token`, or kUnk when it is not in the vocabulary.
  int32_t id(const std::string& token) const;
  // The token of `id`; throws Error when `id` is out of range.
  const std::string& token(int32_t id) const;
  size_t size() const { return tokens_.size(); }
  const std::vector<std::string>& tokens() const { return tokens_; }

  std::vector<int32_t> encode(const std::vector<std::string>& tokens, bool add_bos = false,
                              bool add_eos = false) const;
  // Tokens of `ids` up to the first <eos>. With `strip_specials`, <pad>, <bos> and <eos> are
  // dropped (<unk> is kept: it stands for a real token); without it they are written out, the
  // <eos> included. Out-of-range ids throw Error.
  std::vector<std::string> decode(const std::vector<int32_t>& ids,
                                  bool strip_specials = true) const;

  // One token per line, in id order, specials first, each line ending in '\n'. Small and
  // readable enough to store in a checkpoint's JSON metadata.
  std::string to_string() const;
  // Inverse of to_string(). Throws Error when the specials are not the first four lines in order,
  // a line is empty, or a token repeats (the message names the line).
  static Vocab from_string(const std::string& text);

  bool operator==(const Vocab& other) const { return tokens_ == other.tokens_; }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
};

// The special tokens' spellings, in id order.
const std::vector<std::string>& special_tokens();

// One token per Unicode character: the text is split into UTF-8 code points (bytes that are not
// valid UTF-8 become one token each), spaces included, so joining the tokens gives the text back.
std::vector<std::string> tokenize_chars(const std::string& text);

// Tokens separated by runs of ASCII whitespace; leading/trailing whitespace is ignored.
std::vector<std::string> tokenize_words(const std::string& text);

}  // namespace mixlab
