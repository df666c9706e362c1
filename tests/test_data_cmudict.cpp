#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <set>

#include "core/settings.h"
#include "core/error.h"
#include "test_data_util.h"
#include "train/data/cmudict.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::contains;
using mixlab::testing::error_of;
using mixlab::testing::TempDir;
using mixlab::testing::write_file;
using mixlab::testing::write_gz;
using Tokens = std::vector<std::string>;

namespace {}  // namespace

TEST_CASE("data: cmudict format reader groups alternates and strips stress") {
  TempDir dir;
  write_file(dir.file("cmudict.txt"),
             ";;; # CMUdict  --  Major Version: 0.07\n"
             "\n"
             "READ  R IY1 D\n"
             "O'BRIEN  OW0 B R AY1 AH0 N\n"
             "READ(1)  R EH1 D\n"
             "tomato T AH0 M EY1 T OW2 # a comment\n"
             "TOMATO(2)  T AH0 M AA1 T OW2\n");
  const std::vector<G2PEntry> entries = read_cmudict(dir.file("cmudict.txt"));
  REQUIRE(entries.size() == 3);
  CHECK(entries[0] == G2PEntry{"READ", {{"R", "IY", "D"}, {"R", "EH", "D"}}});
  CHECK(entries[1] == G2PEntry{"O'BRIEN", {{"OW", "B", "R", "AY", "AH", "N"}}});
  CHECK(entries[2] ==
        G2PEntry{"TOMATO", {{"T", "AH", "M", "EY", "T", "OW"}, {"T", "AH", "M", "AA", "T", "OW"}}});

  write_file(dir.file("bad.txt"), "READ  R IY1 D\nLONELY\n");
  const std::string message = error_of([&] { read_cmudict(dir.file("bad.txt")); });
  CHECK(contains(message, dir.file("bad.txt") + ":2:"));
  write_file(dir.file("bad2.txt"), "READ()  R IY1 D\n");
  CHECK(contains(error_of([&] { read_cmudict(dir.file("bad2.txt")); }), ":1:"));
}

TEST_CASE("data: g2p train and ref readers for plain and gzip files") {
  TempDir dir;
  const std::string train =
      "READ\tR IY D\n"
      "ABS\tAE B Z\n"
      "READ\tR EH D\n"
      "\n"
      "X\tEH K S\n";
  write_file(dir.file("t.train"), train);
  write_gz(dir.file("t.train.gz"), train);
  for (const std::string name : {"t.train", "t.train.gz"}) {
    const std::vector<G2PEntry> entries = read_g2p_train(dir.file(name));
    REQUIRE(entries.size() == 3);
    CHECK(entries[0] == G2PEntry{"READ", {{"R", "IY", "D"}, {"R", "EH", "D"}}});
    CHECK(entries[1].word == "ABS");
    CHECK(count_pronunciations(entries) == 4);
  }
  const std::vector<Seq2SeqText> pairs = g2p_pairs(read_g2p_train(dir.file("t.train")));
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[1] == Seq2SeqText{{"R", "E", "A", "D"}, {"R", "EH", "D"}});

  write_gz(dir.file("t.ref.gz"), "ABS\tAE B Z\tEY B IY EH S\nABBY\tAE B IY\n");
  const std::vector<G2PEntry> refs = read_g2p_ref(dir.file("t.ref.gz"));
  REQUIRE(refs.size() == 2);
  CHECK(refs[0] == G2PEntry{"ABS", {{"AE", "B", "Z"}, {"EY", "B", "IY", "EH", "S"}}});
  CHECK(refs[1] == G2PEntry{"ABBY", {{"AE", "B", "IY"}}});

  write_file(dir.file("bad.train"), "READ\tR IY D\nREAD R EH D\n");
  CHECK(contains(error_of([&] { read_g2p_train(dir.file("bad.train")); }),
                 dir.file("bad.train") + ":2:"));
  write_file(dir.file("empty.train"), "READ\tR IY D\nREAD\t  \n");
  CHECK(contains(error_of([&] { read_g2p_train(dir.file("empty.train")); }), ":2: empty"));
  write_file(dir.file("bad.ref"), "ABS\tAE B Z\nABBY\n");
  CHECK(contains(error_of([&] { read_g2p_ref(dir.file("bad.ref")); }), ":2:"));
  write_file(dir.file("dup.ref"), "ABS\tAE B Z\nABBY\tAE B IY\nABS\tEY B IY EH S\n");
  CHECK(contains(error_of([&] { read_g2p_ref(dir.file("dup.ref")); }), ":3:"));
  write_file(dir.file("hole.ref"), "ABS\tAE B Z\t\tEY B IY EH S\n");
  CHECK(contains(error_of([&] { read_g2p_ref(dir.file("hole.ref")); }), ":1: empty"));
  CHECK(contains(error_of([&] { read_g2p_ref(dir.file("missing.ref")); }), "missing.ref"));
}

TEST_CASE("data: g2p dev split holds out whole headwords with a seed") {
  std::vector<G2PEntry> entries;
  for (int i = 0; i < 100; ++i) {
    G2PEntry entry{"W", {{"AA"}}};
    entry.word += std::to_string(i);  // not "W" + ...: GCC 12 warns falsely (-Wrestrict, PR105651)
    if (i % 3 == 0) entry.prons.push_back({"EH"});
    entries.push_back(entry);
  }
  const G2PDevSplit split = split_g2p_dev(entries, 10, 5);
  CHECK(split.dev.size() == 10);
  CHECK(split.train.size() == 90);
  std::set<std::string> dev_words;
  for (const G2PEntry& e : split.dev) dev_words.insert(e.word);
  CHECK(dev_words.size() == 10);
  for (const G2PEntry& e : split.train) CHECK_FALSE(dev_words.count(e.word));
  CHECK(count_pronunciations(split.train) + count_pronunciations(split.dev) ==
        count_pronunciations(entries));
  // Both sides keep the input order.
  for (size_t i = 1; i < split.dev.size(); ++i) {
    CHECK(std::stoi(split.dev[i - 1].word.substr(1)) < std::stoi(split.dev[i].word.substr(1)));
  }
  CHECK(split_g2p_dev(entries, 10, 5).dev == split.dev);
  CHECK(split_g2p_dev(entries, 10, 6).dev != split.dev);
  CHECK_THROWS_AS(split_g2p_dev(entries, 101, 5), Error);
}

TEST_CASE("data: load_g2p names the missing file and default dir honours MIXLAB_G2P_DIR") {
  TempDir dir;
  const std::string message = error_of([&] { load_g2p(dir.path()); });
  CHECK(contains(message, dir.file("g014b2b.train")));
  CHECK(contains(message, "MIXLAB_G2P_DIR"));

  write_file(dir.file("g014b2b.train"), "A\tAH\nB\tB IY\nC\tS IY\n");
  write_gz(dir.file("g014b2b.ref.gz"), "D\tD IY\n");
  const G2PData data = load_g2p(dir.path(), 1, 0);
  CHECK(data.train.size() == 2);
  CHECK(data.dev.size() == 1);
  CHECK(data.test.size() == 1);

  const char* old = setting(Setting::G2pDir);
  const std::string saved = old ? old : "";
  override_setting(Setting::G2pDir, dir.path().c_str());
  CHECK(default_g2p_dir() == dir.path());
  override_setting(Setting::G2pDir, nullptr);
  CHECK(default_g2p_dir() == std::string(MIXLAB_SOURCE_DIR) + "/data/g2p");
  if (old) override_setting(Setting::G2pDir, saved.c_str());
}

TEST_CASE("data: the shipped g014b2b copy has the published counts") {
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = std::string(MIXLAB_SOURCE_DIR) + "/data/g2p";
  const G2PData data = load_g2p(dir);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("loading the shipped g2p data took ", seconds, " s");
  CHECK(data.train.size() + data.dev.size() == 106837);
  CHECK(data.dev.size() == 2670);
  CHECK(count_pronunciations(data.train) + count_pronunciations(data.dev) == 113438);
  CHECK(data.test.size() == 12000);
  CHECK(count_pronunciations(data.test) == 12753);

  std::set<char> graphemes;
  std::set<std::string> phonemes;
  for (const auto* side : {&data.train, &data.dev, &data.test}) {
    for (const G2PEntry& entry : *side) {
      graphemes.insert(entry.word.begin(), entry.word.end());
      for (const Pronunciation& pron : entry.prons) phonemes.insert(pron.begin(), pron.end());
    }
  }
  CHECK(graphemes.size() == 27);
  CHECK(phonemes.size() == 39);
  // No test word is in train or dev.
  std::set<std::string> test_words;
  for (const G2PEntry& entry : data.test) test_words.insert(entry.word);
  for (const G2PEntry& entry : data.train) REQUIRE_FALSE(test_words.count(entry.word));
}
