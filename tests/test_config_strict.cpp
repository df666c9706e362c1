// config.ini and --config are read strictly, a run folder describes its run from any working
// directory, and resume semantics are the written ones (docs/runs.md): a complete run is
// refused, a longer one extends the schedule without a jump, and --config replays it exactly.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "io/run_log.h"
#include "io/safetensors.h"
#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using mixlab::testing::contains;
using mixlab::testing::read_file;
using mixlab::testing::TempDir;

using ConfigRan = mixlab::testing::Exit;

// `mixlab ARGS` run by the shell in `cwd` (the test's folder when empty).
ConfigRan run_in(const TempDir& dir, const std::string& args, const std::string& cwd = "") {
  static int calls = 0;
  const std::string log = dir.file("cfg-" + std::to_string(calls++) + ".log");
  ConfigRan r = mixlab::testing::run_app_shell(args, log, cwd.empty() ? dir.path() : cwd);
  fs::remove(log);
  return r;
}

void write_words(const std::string& path) {
  const std::vector<std::string> words = {"a", "b", "c", "d", "e", "f", "g", "h"};
  std::ofstream out(path);
  for (int i = 0; i < 60; ++i) {
    out << (i % 2 ? "pos" : "neg") << "\t";
    for (int k = 0; k < 4; ++k) out << words[(i * 5 + k) % words.size()] << " ";
    out << words[i % 2] << "\n";
  }
}

const std::string kSmall =
    " --dim 16 --heads 2 --layers 1 --batch 8 --threads 1 --quiet --log-every 1";

std::map<std::string, std::vector<uint8_t>> all_tensors(const std::string& path) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& r : mixlab::load_safetensors(path).tensors) out[r.name] = r.bytes;
  return out;
}

// A copy of config.ini with `line` added under its section (at the end).
std::string config_with(const TempDir& dir, const std::string& run, const std::string& name,
                        const std::string& line) {
  const std::string path = dir.file(name);
  std::ofstream(path) << read_file(run + "/config.ini") << line << "\n";
  return path;
}

}  // namespace

TEST_CASE("config: unknown, duplicate and unparsable lines are errors naming file, line, key") {
  TempDir dir;
  write_words(dir.file("cls.tsv"));
  REQUIRE(run_in(dir, "classify train --data cls.tsv --steps 2 --out r" + kSmall).code == 0);
  const std::string run = dir.file("r");
  const int lines = [&] {
    int n = 0;
    for (char c : read_file(run + "/config.ini")) n += c == '\n';
    return n;
  }();
  const std::string at = ":" + std::to_string(lines + 1) + ":";
  struct Case {
    std::string line, message;
  };
  for (const Case& c : {Case{"frobnicate=1", "unknown key 'frobnicate' in [classify.train]"},
                        Case{"dim=32", "duplicate key 'dim' in [classify.train]"},
                        Case{"\x01\x7f garbage without equals", "unparsable line"},
                        Case{"[classify.frobnicate]", "names no mixlab command"}}) {
    const std::string path = config_with(dir, run, "bad.ini", c.line);
    const ConfigRan r = run_in(dir, "--config " + path + " classify train --out r2");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(contains(r.output, path + at));
    CHECK(contains(r.output, c.message));
    CHECK(!fs::exists(dir.file("r2")));
  }

  // The same strictness for a run's own config.ini on --resume, which names it.
  const std::string stored = read_file(run + "/config.ini");
  std::ofstream(run + "/config.ini") << stored << "frobnicate=1\n";
  const ConfigRan resumed = run_in(dir, "classify train --resume --steps 4 --out r");
  CHECK(resumed.code == 2);
  CHECK(contains(resumed.output, "r/config.ini:"));
  CHECK(contains(resumed.output, "frobnicate"));
  std::ofstream(run + "/config.ini") << stored;

  // A run of another command is named as such, not reported as contradicting defaults.
  std::string other = stored;
  other.replace(other.find("[classify.train]"), 16, "[translate.train]");
  std::ofstream(run + "/config.ini") << other;
  const ConfigRan wrong = run_in(dir, "classify train --resume --steps 4 --out r");
  CHECK(wrong.code == 2);
  CHECK(contains(wrong.output, "holds a `translate train` run"));
  CHECK(!contains(wrong.output, "contradict"));
}

TEST_CASE("config: a run resumes from any working directory") {
  TempDir dir;
  write_words(dir.file("cls.tsv"));
  REQUIRE(run_in(dir, "classify train --data cls.tsv --steps 3 --out r" + kSmall).code == 0);
  CHECK(contains(read_file(dir.file("r/config.ini")), "data=\"" + dir.file("cls.tsv") + "\""));
  const ConfigRan r = run_in(dir, "classify train --resume --steps 5 --out " + dir.file("r"), "/");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(contains(read_file(dir.file("r/.mixlab-run.json")), "last.safetensors"));
}

TEST_CASE("config: resuming a complete run is refused, extending it replays bit for bit") {
  TempDir dir;
  write_words(dir.file("cls.tsv"));
  // One epoch of 7 steps under a cosine planned for 100: the rate is still high at its end.
  const std::string base = "classify train --data cls.tsv --warmup 2 --lr 0.01" + kSmall;
  REQUIRE(run_in(dir, base + " --epochs 1 --steps 100 --out r").code == 0);
  const auto finished = read_file(dir.file("r/last.safetensors"));

  const ConfigRan done = run_in(dir, "classify train --resume --out r");
  CHECK(done.code == 2);
  CHECK(contains(done.output, "the run in r is complete at step 7 (--epochs 1)"));
  CHECK(contains(done.output, "raise --steps or --epochs"));
  CHECK(read_file(dir.file("r/last.safetensors")) == finished);

  // A second epoch, the schedule shortened to 30 steps: it continues from the rate at step 7.
  const ConfigRan extended = run_in(dir, "classify train --resume --epochs 2 --steps 30 --out r");
  INFO(extended.output);
  REQUIRE(extended.code == 0);
  CHECK(contains(read_file(dir.file("r/config.ini")), "schedule-history=\"7:100:2\""));

  // The learning rate continues from where it stood, falling: no jump at the resumed step.
  std::map<int64_t, double> lr;
  for (const auto& row : mixlab::read_metrics_csv(dir.file("r/metrics.csv")).rows)
    if (row.phase == "train") lr[row.step] = row.values.at("lr");
  REQUIRE(lr.size() == 14);
  for (int64_t t = 4; t <= 14; ++t) CHECK(lr[t] <= lr[t - 1]);
  CHECK(lr[8] > 0.9 * lr[7]);  // a cosine's first steps from its start: close to it
  CHECK(lr[14] > 0);

  // --config replays the resumed and extended run: the same weights and optimizer state.
  const ConfigRan replay = run_in(dir, "--config r/config.ini classify train --out r2");
  INFO(replay.output);
  REQUIRE(replay.code == 0);
  CHECK(all_tensors(dir.file("r2/last.safetensors")) ==
        all_tensors(dir.file("r/last.safetensors")));
  // Two epochs under a fresh 30-step cosine follow another schedule (the written rule is what
  // the replay followed): their weights differ.
  REQUIRE(run_in(dir, base + " --epochs 2 --steps 30 --out r3").code == 0);
  CHECK(all_tensors(dir.file("r3/last.safetensors")) !=
        all_tensors(dir.file("r/last.safetensors")));

  // A cosine that ran to its end: a longer run is allowed but says it would barely train.
  REQUIRE(run_in(dir, base + " --steps 4 --out r4").code == 0);
  const ConfigRan longer = run_in(dir, "classify train --resume --steps 6 --out r4");
  CHECK(longer.code == 0);
  CHECK(contains(longer.output, "barely train"));
}
