// CMU Pronouncing Dictionary data for grapheme-to-phoneme (G2P) conversion: a reader for the
// dictionary's own format and for the g014b2b train/test split shipped in data/g2p (see its
// README), plus a seeded dev split held out from train by headword.
//
// Graphemes are the characters of the word (A-Z and the apostrophe in g014b2b); phonemes are the
// space-separated tokens with stress digits removed (AH0 -> AH). Every reader accepts gzip or
// plain files (file_io.h) and reports a malformed line as "FILE:LINE: ...".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/seq2seq_text.h"

namespace mixlab {

using Pronunciation = std::vector<std::string>;

// A headword and all its pronunciations, in file order.
struct G2PEntry {
  std::string word;
  std::vector<Pronunciation> prons;
  bool operator==(const G2PEntry&) const = default;
};

// The g014b2b data: train minus dev, dev (held out from train by headword), test with all the
// references of each word.
struct G2PData {
  std::vector<G2PEntry> train;
  std::vector<G2PEntry> dev;
  std::vector<G2PEntry> test;
};

// The CMU dictionary format (cmudict-0.7b, cmudict.dict): "WORD  PH1 PH2 ..." with any run of
// whitespace after the word; alternates written "WORD(1)", "WORD(2)" join their headword; lines
// starting with ";;;" are comments; a "#" token starts an end-of-line comment (cmudict.dict).
// Words are upper-cased (ASCII) to match g014b2b; stress digits are removed. Entries are grouped
// by headword in order of first appearance, pronunciations in file order.
std::vector<G2PEntry> read_cmudict(const std::string& path);

// The g014b2b train file: "WORD<TAB>PH1 PH2 ..." per line, a word with several pronunciations on
// several (not necessarily adjacent) lines. Grouped by headword as above.
std::vector<G2PEntry> read_g2p_train(const std::string& path);

// The g014b2b .ref file: "WORD<TAB>PRON1<TAB>PRON2..." — one line per test word with ALL its
// reference pronunciations, separated by tabs, phonemes by spaces. A repeated word is an error.
std::vector<G2PEntry> read_g2p_ref(const std::string& path);

struct G2PDevSplit {
  std::vector<G2PEntry> train;
  std::vector<G2PEntry> dev;
};

// Holds out `dev_words` headwords (with all their pronunciations): the entries' indices are
// shuffled with SplitMix64(seed) (Fisher-Yates, rng.h) and the first `dev_words` go to dev. Both
// sides keep the input order. Throws Error when dev_words exceeds the number of entries.
G2PDevSplit split_g2p_dev(const std::vector<G2PEntry>& entries, size_t dev_words = 2670,
                          uint64_t seed = 0);

// The directory holding g014b2b.train(.gz) and g014b2b.ref(.gz): $MIXLAB_G2P_DIR when set, else
// the copy shipped with the sources, MIXLAB_SOURCE_DIR "/data/g2p".
std::string default_g2p_dir();

// Reads `dir`/g014b2b.train and `dir`/g014b2b.ref (each plain or .gz) and splits off the dev set.
// A missing file throws Error naming the path and where the data come from.
G2PData load_g2p(const std::string& dir = default_g2p_dir(), size_t dev_words = 2670,
                 uint64_t seed = 0);

// One pair per pronunciation: src the word's characters, tgt the phonemes. For training; score
// the test set against G2PEntry::prons (a word is right when it matches any reference).
std::vector<Seq2SeqText> g2p_pairs(const std::vector<G2PEntry>& entries);

// Total number of pronunciations in `entries`.
size_t count_pronunciations(const std::vector<G2PEntry>& entries);

}  // namespace mixlab
