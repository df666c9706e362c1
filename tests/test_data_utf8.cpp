// Text data files must be UTF-8: a bad byte is an error at read time naming the file, line and
// column, in every text reader (TSV pairs, labelled text, CMUdict), plain or gzip.
#include <doctest/doctest.h>

#include <string>

#include "test_data_util.h"
#include "train/data/cmudict.h"
#include "train/data/file_io.h"
#include "train/data/text_files.h"

using namespace mixlab;
using mixlab::testing::error_of;
using mixlab::testing::TempDir;
using mixlab::testing::write_file;
using mixlab::testing::write_gz;

TEST_CASE("data: find_invalid_utf8 accepts UTF-8 and finds the first bad byte") {
  CHECK(find_invalid_utf8("") == std::string::npos);
  CHECK(find_invalid_utf8("plain ascii\tand tab\n") == std::string::npos);
  CHECK(find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF") ==
        std::string::npos);  // é € 😀 U+10FFFF
  struct Case {
    std::string text;
    size_t at;
  };
  for (const Case& c : {
           Case{"ab\xFF", 2},                // never valid
           Case{"\x80", 0},                  // continuation byte without a lead
           Case{"x\xC3", 1},                 // cut short at the end
           Case{"x\xC3y", 1},                // bad continuation
           Case{"\xC0\xAF", 0},              // overlong '/'
           Case{"\xE0\x80\xAF", 0},          // overlong, three bytes
           Case{"ok \xED\xA0\x80", 3},       // UTF-16 surrogate U+D800
           Case{"\xF4\x90\x80\x80", 0},      // above U+10FFFF
           Case{"\xE2\x82\xAC\xE2\x82", 3},  // a good euro sign, then a cut one
       }) {
    INFO(c.text);
    CHECK(find_invalid_utf8(c.text) == c.at);
  }
}

TEST_CASE("data: invalid UTF-8 in a text data file names file, line and column") {
  TempDir dir;
  const std::string bad =
      "walk\tWALK\njump\tJUMP\nl\xC3\xA9"
      "ft\tLEFT\nru\xE9n\tRUN\n";  // Latin-1 é
  write_file(dir.file("p.tsv"), bad);
  write_gz(dir.file("p.tsv.gz"), bad);
  for (const std::string name : {"p.tsv", "p.tsv.gz"}) {
    const std::string path = dir.file(name);
    const std::string expected = path + ":4: invalid UTF-8 (byte 0xE9 at column 3)";
    CHECK(error_of([&] { read_parallel_tsv(path); }).find(expected) == 0);
    CHECK(error_of([&] { read_parallel_tsv(path, Tokenization::kChars); }).find(expected) == 0);
  }
  write_file(dir.file("l.tsv"), "pos\tgood film\nneg\tbad \xFF film\n");
  CHECK(error_of([&] {
          read_labelled_text(dir.file("l.tsv"));
        }).find(dir.file("l.tsv") + ":2: invalid UTF-8 (byte 0xFF at column 9)") == 0);
  write_file(dir.file("dict"), "ABLE  EY1 B AH0 L\nCAF\xC9  K AE0 F EY1\n");
  CHECK(error_of([&] {
          read_cmudict(dir.file("dict"));
        }).find(dir.file("dict") + ":2: invalid UTF-8 (byte 0xC9 at column 4)") == 0);
}
