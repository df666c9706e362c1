// A run touches only what it wrote (apps/run_folder.h, io/atomic_file.h): each test runs the real
// `mixlab` on tiny data it makes itself and checks the effect on the files, the exit code and the
// message.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/temp_dir.h"
#include "train/run/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using mixlab::testing::contains;
using mixlab::testing::read_file;
using mixlab::testing::TempDir;

using Ran = mixlab::testing::Exit;

// `mixlab ARGS` run by the shell in `cwd` (the test's folder when empty), with `env` ("K=V ...")
// in front; stdout and stderr together.
Ran mixlab_in(const TempDir& dir, const std::string& args, const std::string& cwd = "",
              const std::string& env = "") {
  static int calls = 0;
  const std::string log = dir.file("run-" + std::to_string(calls++) + ".log");
  Ran r = mixlab::testing::run_app_shell(args, log, cwd.empty() ? dir.path() : cwd, env);
  fs::remove(log);
  return r;
}

// Labelled text: two labels, lines of the given words (the label decided by the last word).
void write_labelled(const std::string& path, const std::vector<std::string>& words) {
  std::ofstream out(path);
  for (int i = 0; i < 60; ++i) {
    out << (i % 2 ? "pos" : "neg") << "\t";
    for (int k = 0; k < 4; ++k) out << words[(i * 7 + k * 3) % words.size()] << " ";
    out << words[i % 2] << "\n";
  }
}

const std::string kTiny = " --dim 16 --heads 2 --layers 1 --batch 8 --threads 1 --quiet";

// Every regular file of a folder (recursively) with its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path());
  return out;
}

// Rewrites a mixlab file with `edit` applied to its records and metadata, checksum renewed, so
// that only the defect the test wants is in it.
template <typename Edit>
void rewrite_checkpoint(const std::string& from, const std::string& to, Edit edit) {
  mixlab::SafetensorsFile f = mixlab::load_safetensors(from);
  edit(f.tensors, f.metadata);
  f.metadata.erase("mixlab.checksum");
  f.metadata["mixlab.checksum"] = mixlab::checkpoint_checksum(f.tensors, f.metadata);
  mixlab::save_safetensors(to, f.tensors, f.metadata);
}

// A trained run in DIR/name on cls.tsv (words a-h).
std::string train_run(const TempDir& dir, const std::string& name, const std::string& extra = "") {
  if (!fs::exists(dir.file("cls.tsv")))
    write_labelled(dir.file("cls.tsv"), {"a", "b", "c", "d", "e", "f", "g", "h"});
  const Ran r =
      mixlab_in(dir, "classify train --data cls.tsv --epochs 1" + kTiny + " --out " + name + extra);
  INFO(r.output);
  REQUIRE(r.code == 0);
  return dir.file(name);
}

}  // namespace

TEST_CASE("run folder: --overwrite of a folder that holds no run touches nothing") {
  TempDir dir;
  write_labelled(dir.file("cls.tsv"), {"a", "b", "c", "d"});
  fs::create_directories(dir.file("u"));
  const std::map<std::string, std::string> mine = {
      {"budget.csv", "1\n"},       {"plot.png", "png"}, {"notes.json", "{}"},
      {"setup.ini", "[x]"},        {"job.log", "log"},  {".settings.json", "{}"},
      {"thesis.tmp.docx", "draft"}};
  for (const auto& [name, text] : mine) std::ofstream(dir.file("u/" + name)) << text;
  for (const char* flags : {" --overwrite", ""}) {
    const Ran r = mixlab_in(dir, "classify train --data cls.tsv --out u" + kTiny + flags);
    CHECK(r.code == 2);
    CHECK(contains(r.output, "holds no mixlab run"));
    CHECK(contains(r.output, "budget.csv"));
    CHECK(contains(r.output, "thesis.tmp.docx"));
    CHECK(snapshot(dir.file("u")) == mine);
  }
}

TEST_CASE("run folder: the manifest lists what the run wrote, --overwrite removes exactly that") {
  TempDir dir;
  const std::string run = train_run(dir, "r");
  const std::string manifest = read_file(run + "/.mixlab-run.json");
  CHECK(contains(manifest, "\"command\":\"classify.train\""));
  for (const char* name : {"config.ini", "model.json", "last.safetensors", "best.safetensors",
                           "metrics.csv", "metrics.jsonl"})
    CHECK_MESSAGE(contains(manifest, std::string("\"") + name + "\""), name);

  // A user's file in the run folder: --overwrite is refused naming it, nothing changes.
  std::ofstream(run + "/notes.txt") << "mine";
  const auto before = snapshot(run);
  const Ran refused =
      mixlab_in(dir, "classify train --data cls.tsv --epochs 1 --out r --overwrite" + kTiny);
  CHECK(refused.code == 2);
  CHECK(contains(refused.output, "notes.txt"));
  CHECK(snapshot(run) == before);

  // Without it, --overwrite replaces the run: the new run's manifest, its files.
  fs::remove(run + "/notes.txt");
  const Ran replaced = mixlab_in(
      dir, "classify train --data cls.tsv --epochs 1 --mixer gmlp --out r --overwrite" + kTiny);
  INFO(replaced.output);
  CHECK(replaced.code == 0);
  CHECK(contains(read_file(run + "/model.json"), "\"mixer\":\"gmlp\""));
  CHECK(fs::exists(run + "/last.safetensors"));
}

TEST_CASE("run folder: an atomic write sweeps only mixlab's own dead temporaries") {
  TempDir dir;
  const std::string run = train_run(dir, "r");
  fs::create_directories(dir.file("d"));
  std::ofstream(dir.file("d/notes.tmp.999999")) << "x";
  std::ofstream(dir.file("d/e.safetensors.tmp.999999")) << "y";
  // A temporary of a process that cannot exist (above Linux's largest pid, 4194304): mixlab's
  // own name, so swept.
  std::ofstream(dir.file("d/.mixlab-tmp.4194305.e.safetensors")) << "stale";
  const Ran r =
      mixlab_in(dir, "export --checkpoint " + run + "/last.safetensors --out d/e.safetensors");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(read_file(dir.file("d/notes.tmp.999999")) == "x");
  CHECK(read_file(dir.file("d/e.safetensors.tmp.999999")) == "y");
  CHECK(!fs::exists(dir.file("d/.mixlab-tmp.4194305.e.safetensors")));
  CHECK(fs::exists(dir.file("d/e.safetensors")));
}

TEST_CASE("run folder: average, export and train never write over a file they read") {
  TempDir dir;
  const std::string run = train_run(dir, "r");
  const auto before = snapshot(run);
  const Ran avg = mixlab_in(dir,
                            "average --out r/last.safetensors r/last.safetensors "
                            "r/best.safetensors");
  CHECK(avg.code == 2);
  CHECK(contains(avg.output, "r/last.safetensors"));
  CHECK(contains(avg.output, "reads"));
  // Another spelling of the same file is the same file.
  const Ran avg2 = mixlab_in(dir,
                             "average --out ./r/../r/best.safetensors r/last.safetensors "
                             "r/best.safetensors");
  CHECK(avg2.code == 2);
  const Ran exp =
      mixlab_in(dir, "export --checkpoint r/last.safetensors --out ./r/last.safetensors");
  CHECK(exp.code == 2);
  // Training on a file its own run folder's run wrote (which --overwrite would remove).
  const Ran train =
      mixlab_in(dir, "classify train --data r/metrics.csv --epochs 1 --out r --overwrite" + kTiny);
  CHECK(train.code == 2);
  CHECK(contains(train.output, "a file the run in --out writes"));
  CHECK(snapshot(run) == before);
  // The training checkpoint is intact: the run still resumes.
  const Ran resumed = mixlab_in(dir, "classify train --resume --epochs 2 --out r");
  INFO(resumed.output);
  CHECK(resumed.code == 0);
}

TEST_CASE("run folder: average refuses checkpoints with other vocabularies or label names") {
  TempDir dir;
  write_labelled(dir.file("ah.tsv"), {"a", "b", "c", "d", "e", "f", "g", "h"});
  write_labelled(dir.file("pw.tsv"), {"p", "q", "r", "s", "t", "u", "v", "w"});
  for (const char* name : {"ah", "pw"})
    REQUIRE(mixlab_in(dir, std::string("classify train --epochs 1 --data ") + name + ".tsv --out " +
                               name + kTiny)
                .code == 0);
  const Ran r =
      mixlab_in(dir, "average --out avg.safetensors ah/last.safetensors pw/last.safetensors");
  CHECK(r.code == 1);
  CHECK(contains(r.output, "vocabulary"));
  CHECK(!fs::exists(dir.file("avg.safetensors")));

  // Same words, other label names.
  std::ofstream relabelled(dir.file("ah2.tsv"));
  std::string text = read_file(dir.file("ah.tsv"));
  for (size_t at = 0; (at = text.find("pos\t", at)) != std::string::npos;)
    text.replace(at, 3, "yes");
  relabelled << text;
  relabelled.close();
  REQUIRE(mixlab_in(dir, "classify train --epochs 1 --data ah2.tsv --out ah2" + kTiny).code == 0);
  const Ran labels =
      mixlab_in(dir, "average --out avg.safetensors ah/last.safetensors ah2/last.safetensors");
  CHECK(labels.code == 1);
  CHECK(contains(labels.output, "label names"));
  CHECK(!fs::exists(dir.file("avg.safetensors")));
}

TEST_CASE("run folder: --keep-epochs N leaves exactly N epoch files, also after a resume") {
  TempDir dir;
  train_run(dir, "r", " --epochs 3 --keep-epochs 2");
  auto epochs = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir.file("r")))
      if (e.path().filename().string().starts_with("epoch-")) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  };
  CHECK(epochs() == std::vector<std::string>{"epoch-2.safetensors", "epoch-3.safetensors"});
  const Ran r = mixlab_in(dir, "classify train --resume --epochs 5 --keep-epochs 1 --out r");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(epochs() == std::vector<std::string>{"epoch-5.safetensors"});
}

TEST_CASE("run folder: a checkpoint holding two names of one tensor is refused naming both") {
  TempDir dir;
  const std::string run = train_run(dir, "r");
  rewrite_checkpoint(run + "/best.safetensors", dir.file("two.safetensors"),
                     [](std::vector<mixlab::TensorRecord>& t, auto&) {
                       mixlab::TensorRecord a = t.front(), b = t.front();
                       a.name = "decoder.0.ffn.fc2.bias";
                       b.name = "decoder.layers.0.ffn.fc2.bias";
                       t.push_back(a);
                       t.push_back(b);
                     });
  const Ran r = mixlab_in(dir, "classify eval --checkpoint two.safetensors");
  CHECK(r.code == 1);
  CHECK(contains(r.output, "decoder.0.ffn.fc2.bias"));
  CHECK(contains(r.output, "decoder.layers.0.ffn.fc2.bias"));
  CHECK(contains(r.output, "two names"));
}

TEST_CASE("run folder: export validates the checkpoint against its model before writing") {
  TempDir dir;
  const std::string run = train_run(dir, "r");
  rewrite_checkpoint(run + "/best.safetensors", dir.file("int.safetensors"),
                     [](std::vector<mixlab::TensorRecord>& t, auto&) {
                       for (auto& r : t)
                         if (r.dtype == "F32") r.dtype = "I32";  // same size: loads structurally
                     });
  rewrite_checkpoint(
      run + "/best.safetensors", dir.file("config.safetensors"),
      [](auto&, std::map<std::string, std::string>& m) { m["config"] = "{\"dim\":"; });
  for (const char* bad : {"int", "config"}) {
    const std::string out = dir.file(std::string(bad) + "-export.safetensors");
    const Ran r =
        mixlab_in(dir, std::string("export --checkpoint ") + bad + ".safetensors --out " + out);
    INFO(r.output);
    CHECK(r.code == 1);
    CHECK(contains(r.output, "nothing was written"));
    CHECK(!fs::exists(out));
  }
}

TEST_CASE("run folder: eval refuses data whose tokens do not fit the checkpoint, naming both") {
  TempDir dir;
  train_run(dir, "r");
  write_labelled(dir.file("other.tsv"), {"p", "q", "r", "s", "t", "u", "v", "w"});
  const Ran r = mixlab_in(dir, "classify eval --checkpoint r/best.safetensors --data other.tsv");
  CHECK(r.code == 2);
  CHECK(contains(r.output, "other.tsv"));
  CHECK(contains(r.output, "cls.tsv"));
  CHECK(contains(r.output, "not in the checkpoint's vocabulary"));
}

TEST_CASE("run folder: translate eval refuses data that does not fit, at the start") {
  TempDir dir;
  auto pairs = [&](const std::string& name, const std::string& words, int length) {
    std::ofstream out(dir.file(name));
    for (int i = 0; i < 40; ++i) {
      std::string src, tgt;
      for (int k = 0; k < length; ++k) {
        const char w = words[(i + k * 3) % words.size()];
        src += std::string(src.empty() ? "" : " ") + w;
        tgt += std::string(tgt.empty() ? "" : " ") + static_cast<char>(w - 'a' + 'A');
      }
      out << src << "\t" << tgt << "\n";
    }
  };
  pairs("pairs.tsv", "abcdefgh", 3);
  pairs("other.tsv", "pqrstuvw", 3);
  pairs("long.tsv", "abcdefgh", 12);
  REQUIRE(mixlab_in(dir, "translate train --data pairs.tsv --steps 2 --out t" + kTiny).code == 0);
  const Ran other =
      mixlab_in(dir, "translate eval --checkpoint t/last.safetensors --data other.tsv");
  CHECK(other.code == 2);
  CHECK(contains(other.output, "other.tsv"));
  CHECK(contains(other.output, "pairs.tsv"));
  CHECK(contains(other.output, "not in the checkpoint's vocabulary"));
  const Ran longer =
      mixlab_in(dir, "translate eval --checkpoint t/last.safetensors --data long.tsv");
  CHECK(longer.code == 2);
  CHECK(contains(longer.output, "long.tsv"));
  CHECK(contains(longer.output, "the model takes at most"));
}

// Both train commands read their trainer options (train/optim/schedule.h's history among them)
// before the run folder opens: a bad value leaves no folder behind.
TEST_CASE("run folder: train refuses a bad --schedule-history before it writes anything") {
  TempDir dir;
  write_labelled(dir.file("cls.tsv"), {"a", "b", "c", "d"});
  {
    std::ofstream pairs(dir.file("pairs.tsv"));
    for (int i = 0; i < 30; ++i) pairs << (i % 2 ? "a b\tb a\n" : "c d a\ta d c\n");
  }
  for (const std::string train :
       {"classify train --data cls.tsv", "translate train --data pairs.tsv"}) {
    const Ran r = mixlab_in(dir, train + kTiny + " --steps 2 --schedule-history 3:x --out run");
    INFO(train, ": ", r.output);
    CHECK(r.code == 2);
    CHECK(contains(r.output, "--schedule-history: schedule history '3:x'"));
    CHECK_FALSE(fs::exists(dir.file("run")));
  }
}

TEST_CASE("run folder: messages name the actual problem") {
  TempDir dir;
  const std::string run = train_run(dir, "r");
  SUBCASE("predict --checkpoint DIR") {
    const Ran r = mixlab_in(dir, "classify predict --checkpoint r");
    CHECK(r.code == 1);
    CHECK(contains(r.output, "is a folder"));
    CHECK(!contains(r.output, "changed while loading"));
  }
  SUBCASE("an empty vocabulary") {
    rewrite_checkpoint(run + "/best.safetensors", dir.file("novocab.safetensors"),
                       [](auto&, std::map<std::string, std::string>& m) { m["vocab_src"] = ""; });
    const Ran r = mixlab_in(dir, "classify predict --checkpoint novocab.safetensors");
    CHECK(r.code == 1);
    CHECK(contains(r.output, "empty vocabulary"));
    CHECK(!contains(r.output, "classifies images"));
  }
  SUBCASE("a full disk names the file and says so") {
    const Ran r = mixlab_in(dir, "classify train --data cls.tsv --epochs 1 --out full" + kTiny, "",
                            "MIXLAB_FAULT_ENOSPC=metrics.jsonl");
    CHECK(r.code == 1);
    CHECK(contains(r.output, "metrics.jsonl: write failed: No space left on device"));
    CHECK(contains(r.output, "disk is full"));
  }
  SUBCASE("a failed --overwrite run says what became of best.safetensors") {
    const Ran r = mixlab_in(dir,
                            "classify train --data cls.tsv --epochs 3 --lr 1e6 --warmup 1 "
                            "--overwrite --out r" +
                                kTiny);
    CHECK(r.code == 1);
    CHECK(contains(r.output, "training diverged"));
    CHECK(!fs::exists(run + "/best.safetensors"));
    CHECK(!contains(r.output, "is kept as it was"));
    CHECK(contains(r.output, "no best checkpoint was written"));
  }
  SUBCASE("a run killed before its first checkpoint: one consistent advice") {
    fs::remove(run + "/last.safetensors");
    fs::remove(run + "/best.safetensors");
    const Ran again = mixlab_in(dir, "classify train --data cls.tsv --epochs 1 --out r" + kTiny);
    const Ran resumed = mixlab_in(dir, "classify train --resume --out r");
    CHECK(again.code == 2);
    CHECK(resumed.code == 2);
    CHECK(contains(again.output, "--overwrite"));
    CHECK(contains(resumed.output, "--overwrite"));
    CHECK(!contains(again.output, "continue it with --resume"));
    CHECK(!contains(resumed.output, "without --resume"));
    const Ran replaced =
        mixlab_in(dir, "classify train --data cls.tsv --epochs 1 --overwrite --out r" + kTiny);
    CHECK(replaced.code == 0);
  }
}

TEST_CASE("run folder: observers hear of a file before it is written, so a kill leaves it listed") {
  TempDir dir;
  std::vector<std::string> heard;
  std::vector<bool> existed;
  const int id = mixlab::add_write_observer([&](const std::string& path) {
    heard.push_back(fs::path(path).filename().string());
    existed.push_back(fs::exists(path));
  });
  mixlab::write_file_atomically(dir.file("a.json"), std::string_view("{}"));
  CHECK_THROWS_AS(
      mixlab::write_file_atomically(dir.file("b.json"),
                                    [](std::ostream&) { throw std::runtime_error("writer"); }),
      mixlab::Error);
  mixlab::remove_write_observer(id);
  mixlab::write_file_atomically(dir.file("c.json"), std::string_view("{}"));
  CHECK(heard == std::vector<std::string>{"a.json", "b.json"});
  CHECK(existed == std::vector<bool>{false, false});
}
