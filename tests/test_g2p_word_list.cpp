// `translate eval --data g2p:FILE`: a G2P model scored on a word list outside the g014b2b split
// (scripts/g2p_unseen_words.py makes one), every word against all its references; training on
// such a list is refused.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace mixlab;

namespace {

testing::Exit run_word_list_app(const testing::TempDir& dir, const std::string& args) {
  static int calls = 0;
  return testing::run_app_shell(args, dir.file("log-" + std::to_string(calls++) + ".txt"));
}

}  // namespace

TEST_CASE("g2p word list: eval scores every word of the list against all its references") {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  testing::Exit train = run_word_list_app(
      dir,
      "translate train --data g2p --train-limit 200 --steps 2 --dim 8 --heads 2 --layers 1 "
      "--max-output 3 --quiet --out " +
          run);
  INFO(train.output);
  REQUIRE(train.code == 0);
  std::ofstream(dir.file("unseen.ref")) << "ZYXWORD\tZ IY\tZ AY\nQUUX\tK W AH K S\nFOOBAR\tF UW\n";
  testing::Exit eval =
      run_word_list_app(dir, "translate eval --max-output 3 --data g2p:" + dir.file("unseen.ref") +
                                 " --checkpoint " + run + "/last.safetensors");
  INFO(eval.output);
  REQUIRE(eval.code == 0);
  CHECK(testing::contains(eval.output, "CMUdict word list " + dir.file("unseen.ref")));
  CHECK(testing::contains(eval.output, "test wer"));
  // Three words were scored: each WER is a multiple of 1/3.
  const size_t at = eval.output.find("test wer ");
  REQUIRE(at != std::string::npos);
  const double wer = std::stod(eval.output.substr(at + 9));
  CHECK(wer * 3 == doctest::Approx(std::round(wer * 3)));

  testing::Exit refused =
      run_word_list_app(dir, "translate train --data g2p:" + dir.file("unseen.ref") +
                                 " --steps 1 --out " + dir.file("never"));
  CHECK(refused.code == 2);
  CHECK(testing::contains(refused.output, "translate eval"));
  CHECK_FALSE(fs::exists(dir.file("never")));
  testing::Exit missing =
      run_word_list_app(dir, "translate eval --data g2p:" + dir.file("absent.ref") +
                                 " --checkpoint " + run + "/last.safetensors");
  CHECK(missing.code == 2);
  CHECK(testing::contains(missing.output, "absent.ref"));
}
