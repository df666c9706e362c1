#include <doctest/doctest.h>

#include "core/error.h"
#include "test_data_util.h"
#include "train/data/text_files.h"

using namespace mixlab;
using mixlab::testing::error_of;
using mixlab::testing::TempDir;
using mixlab::testing::write_file;
using mixlab::testing::write_gz;
using Tokens = std::vector<std::string>;

namespace {}  // namespace

TEST_CASE("data: parallel tsv reader with words or characters skips blank lines") {
  TempDir dir;
  const std::string text = "the cat\tle chat\r\n\n   \nsat  down\tassis\n";
  write_file(dir.file("p.tsv"), text);
  write_gz(dir.file("p.tsv.gz"), text);
  for (const std::string name : {"p.tsv", "p.tsv.gz"}) {
    const std::vector<Seq2SeqText> pairs = read_parallel_tsv(dir.file(name));
    REQUIRE(pairs.size() == 2);
    CHECK(pairs[0] == Seq2SeqText{{"the", "cat"}, {"le", "chat"}});
    CHECK(pairs[1] == Seq2SeqText{{"sat", "down"}, {"assis"}});
  }
  const std::vector<Seq2SeqText> chars = read_parallel_tsv(dir.file("p.tsv"), Tokenization::kChars);
  REQUIRE(chars.size() == 2);
  CHECK(chars[0].src == Tokens{"t", "h", "e", " ", "c", "a", "t"});
  CHECK(chars[0].tgt == Tokens{"l", "e", " ", "c", "h", "a", "t"});  // the '\r' is dropped

  const Vocab src = build_src_vocab(read_parallel_tsv(dir.file("p.tsv")));
  const Vocab tgt = build_tgt_vocab(read_parallel_tsv(dir.file("p.tsv")));
  const InMemoryDataset dataset = encode_seq2seq(read_parallel_tsv(dir.file("p.tsv")), src, tgt);
  REQUIRE(dataset.size() == 2);
  CHECK(dataset.at(0).src == std::vector<int32_t>{src.id("the"), src.id("cat"), Vocab::kEos});
  CHECK(dataset.at(1).tgt == std::vector<int32_t>{Vocab::kBos, tgt.id("assis"), Vocab::kEos});
}

TEST_CASE("data: parallel tsv malformed lines give FILE:LINE errors") {
  TempDir dir;
  const std::string path = dir.file("bad.tsv");
  write_file(path, "a\tb\n\nno tab here\n");
  std::string message = error_of([&] { read_parallel_tsv(path); });
  CHECK(message.find(path + ":3: no tab") != std::string::npos);

  write_file(path, "a\tb\n\t target\n");
  message = error_of([&] { read_parallel_tsv(path); });
  CHECK(message.find(path + ":2: empty source") != std::string::npos);

  write_file(path, "a\t   \n");
  message = error_of([&] { read_parallel_tsv(path); });
  CHECK(message.find(path + ":1: empty target") != std::string::npos);

  write_file(path, "a\tb\tc\n");
  message = error_of([&] { read_parallel_tsv(path); });
  CHECK(message.find(path + ":1: more than one tab") != std::string::npos);

  message = error_of([&] { read_parallel_tsv(dir.file("absent.tsv")); });
  CHECK(message.find("absent.tsv") != std::string::npos);
}

TEST_CASE("data: labelled text reader and label numbering") {
  TempDir dir;
  const std::string path = dir.file("l.tsv");
  write_file(path, "pos\tgreat fun\nneg\tdull\n\npos\tloved it\tagain\n");
  const std::vector<LabelledText> texts = read_labelled_text(path);
  REQUIRE(texts.size() == 3);
  CHECK(texts[0] == LabelledText{"pos", {"great", "fun"}});
  CHECK(texts[2] == LabelledText{"pos", {"loved", "it", "again"}});
  const std::vector<std::string> names = label_names(texts);
  CHECK(names == std::vector<std::string>{"neg", "pos"});
  const std::vector<LabelledTokens> numbered = number_labels(texts, names);
  CHECK(numbered[0].label == 1);
  CHECK(numbered[1].label == 0);
  CHECK_THROWS_AS(number_labels(texts, {"pos"}), Error);

  const Vocab vocab = Vocab::build({texts[0].tokens, texts[1].tokens});
  const InMemoryDataset dataset = encode_labelled(numbered, vocab);
  CHECK(dataset.at(1).src == std::vector<int32_t>{vocab.id("dull")});
  CHECK(dataset.at(2).src[0] == Vocab::kUnk);
  CHECK(dataset.at(2).label == 1);

  write_file(path, "pos\tgood\n\t text\n");
  CHECK(error_of([&] { read_labelled_text(path); }).find(path + ":2: empty label") !=
        std::string::npos);
  write_file(path, "pos\tgood\nneg\t \n");
  CHECK(error_of([&] { read_labelled_text(path); }).find(path + ":2: empty text") !=
        std::string::npos);
  write_file(path, "just text\n");
  CHECK(error_of([&] { read_labelled_text(path); }).find(path + ":1: no tab") != std::string::npos);
}
