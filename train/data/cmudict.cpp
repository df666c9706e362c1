#include "train/data/cmudict.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "train/data/file_io.h"
#include "train/data/rng.h"
#include "train/data/vocab.h"
#include "core/settings.h"

namespace mixlab {

namespace {

// "AH0" -> "AH": the split and the published results use unstressed phonemes.
std::string strip_stress(std::string_view phoneme) {
  std::string out;
  for (char c : phoneme) {
    if (c < '0' || c > '9') out.push_back(c);
  }
  return out;
}

// Collects pronunciations under their headword, keeping first-appearance order.
class Grouper {
 public:
  void add(const std::string& word, Pronunciation pron) {
    auto [it, inserted] = index_.emplace(word, entries_.size());
    if (inserted) entries_.push_back({word, {}});
    entries_[it->second].prons.push_back(std::move(pron));
  }
  std::vector<G2PEntry> take() { return std::move(entries_); }

 private:
  std::vector<G2PEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// Phonemes of one space-separated pronunciation; an empty one or a token that is empty once the
// stress digits are gone is an error at path:line.
Pronunciation parse_pron(std::string_view text, const std::string& path, size_t line) {
  Pronunciation pron;
  for (std::string_view piece : split_whitespace(text)) {
    std::string phoneme = strip_stress(piece);
    check(!phoneme.empty(), path, ":", line, ": phoneme '", piece, "' has no letters");
    pron.push_back(std::move(phoneme));
  }
  check(!pron.empty(), path, ":", line, ": empty pronunciation");
  return pron;
}

std::string missing_file_message(const std::string& path) {
  return path + "(.gz) not found; the g014b2b split ships with mixlab in data/g2p (" +
         MIXLAB_SOURCE_DIR + "/data/g2p), or set MIXLAB_G2P_DIR to a directory holding " +
         "g014b2b.train and g014b2b.ref (Phonetisaurus test/g014b2b)";
}

}  // namespace

std::vector<G2PEntry> read_cmudict(const std::string& path) {
  const std::string text = read_text_file(path);
  Grouper grouper;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t line = i + 1;
    std::string_view content = trim(lines[i]);
    if (content.empty() || content.substr(0, 3) == ";;;") continue;
    std::vector<std::string_view> pieces = split_whitespace(content);
    auto comment = std::find(pieces.begin(), pieces.end(), std::string_view("#"));
    pieces.erase(comment, pieces.end());
    check(pieces.size() >= 2, path, ":", line, ": expected 'WORD PH1 PH2 ...', got '", content,
          "'");
    std::string word(pieces[0]);
    // "WORD(2)" is the second pronunciation of WORD.
    if (word.size() > 2 && word.back() == ')') {
      const size_t open = word.rfind('(');
      check(open != std::string::npos && open > 0 && open + 2 < word.size() &&
                std::all_of(word.begin() + static_cast<std::ptrdiff_t>(open) + 1, word.end() - 1,
                            [](char c) { return c >= '0' && c <= '9'; }),
            path, ":", line, ": malformed alternate marker in '", word, "'");
      word.resize(open);
    }
    for (char& c : word) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    Pronunciation pron;
    for (size_t k = 1; k < pieces.size(); ++k) {
      std::string phoneme = strip_stress(pieces[k]);
      check(!phoneme.empty(), path, ":", line, ": phoneme '", pieces[k], "' has no letters");
      pron.push_back(std::move(phoneme));
    }
    grouper.add(word, std::move(pron));
  }
  return grouper.take();
}

std::vector<G2PEntry> read_g2p_train(const std::string& path) {
  const std::string text = read_text_file(path);
  Grouper grouper;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t line = i + 1;
    if (trim(lines[i]).empty()) continue;
    const size_t tab = lines[i].find('\t');
    check(tab != std::string_view::npos, path, ":", line, ": expected 'WORD<TAB>PH1 PH2 ...'");
    const std::string_view word = trim(lines[i].substr(0, tab));
    const std::string_view rest = lines[i].substr(tab + 1);
    check(!word.empty(), path, ":", line, ": empty word");
    check(rest.find('\t') == std::string_view::npos, path, ":", line,
          ": more than one tab; a train line holds one pronunciation");
    grouper.add(std::string(word), parse_pron(rest, path, line));
  }
  return grouper.take();
}

std::vector<G2PEntry> read_g2p_ref(const std::string& path) {
  const std::string text = read_text_file(path);
  std::vector<G2PEntry> entries;
  std::unordered_map<std::string, size_t> first_line;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t line = i + 1;
    if (trim(lines[i]).empty()) continue;
    std::vector<std::string_view> fields;
    size_t start = 0;
    for (;;) {
      const size_t tab = lines[i].find('\t', start);
      fields.push_back(lines[i].substr(start, tab == std::string_view::npos ? tab : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    check(fields.size() >= 2, path, ":", line,
          ": expected 'WORD<TAB>PRON1<TAB>PRON2...' (at least one reference)");
    G2PEntry entry;
    entry.word = std::string(trim(fields[0]));
    check(!entry.word.empty(), path, ":", line, ": empty word");
    auto [it, inserted] = first_line.emplace(entry.word, line);
    check(inserted, path, ":", line, ": word '", entry.word, "' already listed on line ",
          it->second, "; a .ref line holds all references of its word");
    for (size_t f = 1; f < fields.size(); ++f)
      entry.prons.push_back(parse_pron(fields[f], path, line));
    entries.push_back(std::move(entry));
  }
  return entries;
}

G2PDevSplit split_g2p_dev(const std::vector<G2PEntry>& entries, size_t dev_words, uint64_t seed) {
  check(dev_words <= entries.size(), "split_g2p_dev: asked for ", dev_words,
        " dev words but there are only ", entries.size());
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  SplitMix64 rng(seed);
  rng.shuffle(order);
  std::vector<bool> is_dev(entries.size(), false);
  for (size_t i = 0; i < dev_words; ++i) is_dev[order[i]] = true;
  G2PDevSplit split;
  split.dev.reserve(dev_words);
  split.train.reserve(entries.size() - dev_words);
  for (size_t i = 0; i < entries.size(); ++i) {
    (is_dev[i] ? split.dev : split.train).push_back(entries[i]);
  }
  return split;
}

std::string default_g2p_dir() {
  if (const char* dir = setting(Setting::G2pDir)) return dir;
  return MIXLAB_SOURCE_DIR "/data/g2p";
}

G2PData load_g2p(const std::string& dir, size_t dev_words, uint64_t seed) {
  const std::string train_path = find_plain_or_gz(dir + "/g014b2b.train");
  check(!train_path.empty(), "load_g2p: ", missing_file_message(dir + "/g014b2b.train"));
  const std::string ref_path = find_plain_or_gz(dir + "/g014b2b.ref");
  check(!ref_path.empty(), "load_g2p: ", missing_file_message(dir + "/g014b2b.ref"));
  G2PDevSplit split = split_g2p_dev(read_g2p_train(train_path), dev_words, seed);
  G2PData data;
  data.train = std::move(split.train);
  data.dev = std::move(split.dev);
  data.test = read_g2p_ref(ref_path);
  return data;
}

std::vector<Seq2SeqText> g2p_pairs(const std::vector<G2PEntry>& entries) {
  std::vector<Seq2SeqText> pairs;
  pairs.reserve(count_pronunciations(entries));
  for (const G2PEntry& entry : entries) {
    const std::vector<std::string> graphemes = tokenize_chars(entry.word);
    for (const Pronunciation& pron : entry.prons) pairs.push_back({graphemes, pron});
  }
  return pairs;
}

size_t count_pronunciations(const std::vector<G2PEntry>& entries) {
  size_t total = 0;
  for (const G2PEntry& entry : entries) total += entry.prons.size();
  return total;
}

}  // namespace mixlab
