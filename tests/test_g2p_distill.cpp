// `translate train --data g2p --train-targets FILE` (sequence-level distillation): the training
// words learn FILE's pronunciations, validation and test keep the dictionary's, the file is
// recorded, and a file that lacks a training word or has a malformed line is refused before
// anything is written. The G2P data is a small dictionary of the test's own (MIXLAB_G2P_DIR).
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/test_data_util.h"

namespace fs = std::filesystem;
using namespace mixlab;

namespace {

// 2,700 words of 3 letters (the recipe holds out 2,670 of them as dev), each pronounced "AH".
std::vector<std::string> distill_words() {
  std::vector<std::string> words;
  for (int i = 0; i < 2700; ++i)
    words.push_back(std::string{static_cast<char>('A' + i / 676),
                                static_cast<char>('A' + i / 26 % 26),
                                static_cast<char>('A' + i % 26)});
  return words;
}

struct DistillFixture {
  testing::TempDir dir;
  std::string env;
  DistillFixture() {
    fs::create_directories(dir.root / "g2p");
    std::string train;
    for (const std::string& w : distill_words()) train += w + "\tAH\n";
    testing::write_file(dir.file("g2p/g014b2b.train"), train);
    testing::write_gz(dir.file("g2p/g014b2b.ref.gz"), "ZZZZ\tZ AH\nYYYY\tW AH\n");
    env = "MIXLAB_G2P_DIR='" + dir.file("g2p") + "'";
  }
  testing::Exit run(const std::string& args) {
    static int calls = 0;
    return testing::run_app_shell(
        "translate train --data g2p --steps 2 --dim 8 --heads 2 --layers 1 --max-output 3 "
        "--threads 1 --quiet " +
            args,
        dir.file("log-" + std::to_string(calls++) + ".txt"), "", env);
  }
};

int64_t target_vocab(const std::string& run) {
  std::smatch m;
  const std::string json = testing::read_file(run + "/model.json");
  REQUIRE(std::regex_search(json, m, std::regex("\"tgt_vocab\":([0-9]+)")));
  return std::stoll(m[1]);
}

}  // namespace

TEST_CASE("g2p distillation: the training words learn the file's targets, which are recorded") {
  DistillFixture f;
  // Every word (dev words too) "B IY", and two words that are no training words.
  std::string targets;
  for (const std::string& w : distill_words()) targets += w + "\tB IY\n";
  targets += "ZZZZ\tZ\nQQQQ\tK\n";
  testing::write_file(f.dir.file("targets.tsv"), targets);
  testing::Exit plain = f.run("--out " + f.dir.file("plain"));
  INFO(plain.output);
  REQUIRE(plain.code == 0);
  testing::Exit distilled =
      f.run("--train-targets " + f.dir.file("targets.tsv") + " --out " + f.dir.file("kd"));
  INFO(distilled.output);
  REQUIRE(distilled.code == 0);
  // The target vocabulary is the file's (B, IY) where the dictionary's is one phoneme (AH).
  CHECK(target_vocab(f.dir.file("kd")) == target_vocab(f.dir.file("plain")) + 1);
  CHECK(testing::contains(distilled.output, "training targets from " + f.dir.file("targets.tsv")));
  CHECK(
      testing::contains(distilled.output, "2672 words of --train-targets are not training words"));
  CHECK(testing::contains(testing::read_file(f.dir.file("kd") + "/last.safetensors"),
                          "train_targets"));
  CHECK(testing::contains(testing::read_file(f.dir.file("kd") + "/config.ini"), "train-targets"));
}

TEST_CASE(
    "g2p distillation: a missing training word or a malformed line is refused, nothing "
    "written") {
  DistillFixture f;
  testing::write_file(f.dir.file("one.tsv"), "AAA\tB IY\n");
  testing::Exit missing =
      f.run("--train-targets " + f.dir.file("one.tsv") + " --out " + f.dir.file("missing"));
  CHECK(missing.code == 2);
  CHECK(testing::contains(missing.output, "has no line for the training word"));
  CHECK_FALSE(fs::exists(f.dir.file("missing")));

  testing::write_file(f.dir.file("bad.tsv"), "AAA\tB IY\nAAB\tB\nAAC B IY\n");
  testing::Exit malformed =
      f.run("--train-targets " + f.dir.file("bad.tsv") + " --out " + f.dir.file("bad"));
  CHECK(malformed.code != 0);
  CHECK(testing::contains(malformed.output, f.dir.file("bad.tsv") + ":3"));
  CHECK_FALSE(fs::exists(f.dir.file("bad")));

  testing::Exit scan =
      testing::run_app_shell("translate train --data scan --steps 1 --train-targets " +
                                 f.dir.file("one.tsv") + " --out " + f.dir.file("scan"),
                             f.dir.file("log-scan.txt"));
  CHECK(scan.code == 2);
  CHECK(testing::contains(scan.output, "--train-targets is for --data g2p"));
  CHECK_FALSE(fs::exists(f.dir.file("scan")));
}
