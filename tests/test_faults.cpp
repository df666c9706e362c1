// Training runs under faults, through the real executable: kill -9 at random points (some inside
// a checkpoint write, held open by the MIXLAB_FAULT_PAUSE_BEFORE_RENAME hook) followed by
// `--resume` ends bit-identical to an uninterrupted run; a full disk (MIXLAB_FAULT_ENOSPC) keeps
// the previous checkpoint; SIGINT and SIGTERM save a checkpoint and exit 130 and 143, and a
// resume from that checkpoint also ends bit-identical.
//
// The kill points are random; the seed is printed on failure and MIXLAB_FAULT_SEED replays it.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/settings.h"
#include "tests/app_runner.h"
#include "tests/temp_dir.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::AppProcess;
using mixlab::testing::Exit;
using mixlab::testing::read_file;
using mixlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr int kEpochs = 8;

void write_fault_pairs(const std::string& path) {
  std::ofstream f(path);
  const char* words[] = {"walk", "run", "jump", "look", "turn"};
  for (int i = 0; i < 60; ++i) {
    const char* a = words[(i * 7) % 5];
    const char* b = words[(i * 3 + i / 5) % 5];
    f << a << " and " << b << "\t" << a << "_" << b << " " << b << "\n";
  }
}

// MIXLAB_NUM_THREADS when set (the thread-sanitizer run uses 2), else 1.
std::string threads() {
  const char* n = setting(Setting::NumThreads);
  return n != nullptr && *n != 0 ? n : "1";
}

// A short training run into `out`; `resume` continues it.
std::vector<std::string> train_args(const std::string& data, const std::string& out, bool resume,
                                    int epochs = kEpochs) {
  std::vector<std::string> args{"translate", "train",
                                "--data",    data,
                                "--dim",     "16",
                                "--heads",   "2",
                                "--layers",  "1",
                                "--batch",   "8",
                                "--epochs",  std::to_string(epochs),
                                "--seed",    "3",
                                "--threads", threads(),
                                "--quiet",   "--out",
                                out};
  if (resume) args.push_back("--resume");
  return args;
}

// What must be equal between two runs: every tensor (model and optimizer state) bit for bit, and
// the training state. (Not the whole file: its metadata may name the run's folder.)
struct Outcome {
  std::vector<TensorRecord> tensors;
  std::vector<std::string> state;
};

Outcome outcome(const std::string& checkpoint) {
  SafetensorsFile f = load_safetensors(checkpoint);
  Outcome o{f.tensors, {}};
  for (const char* key : {"step", "epoch", "loader_position", "rng_seed", "rng_counter"})
    o.state.push_back(key + std::string("=") + (f.metadata.count(key) ? f.metadata[key] : "?"));
  return o;
}

bool same_outcome(const Outcome& a, const Outcome& b) {
  if (a.state != b.state || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorRecord &x = a.tensors[i], &y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.bytes != y.bytes)
      return false;
  }
  return true;
}

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (is_temporary_name(e.path().filename().string()))
      out.push_back(e.path().filename().string());
  return out;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

uint64_t fault_seed() {
  if (const char* s = setting(Setting::FaultSeed)) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

// The uninterrupted run's final checkpoint; `ms_per_epoch`, when given, gets its wall time per
// epoch.
Outcome reference_run(const TempDir& dir, const std::string& data, int epochs = kEpochs,
                      double* ms_per_epoch = nullptr) {
  const std::string out = dir.file("reference");
  const auto start = std::chrono::steady_clock::now();
  Exit e =
      mixlab::testing::run_app(train_args(data, out, false, epochs), dir.file("reference.log"));
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  if (ms_per_epoch != nullptr) *ms_per_epoch = took.count() / epochs;
  INFO(e.output);
  REQUIRE(e.code == 0);
  return outcome(out + "/last.safetensors");
}

// The epoch a run folder's last checkpoint ends, 0 when it has none.
int stored_epoch(const std::string& checkpoint) {
  if (!fs::exists(checkpoint)) return 0;
  SafetensorsFile f = load_safetensors(checkpoint);
  return f.metadata.count("epoch") ? std::stoi(f.metadata["epoch"]) : 0;
}

}  // namespace

TEST_CASE("faults: kill -9 at random points, then --resume, ends bit-identical") {
  TempDir dir;
  const std::string data = dir.file("pairs.tsv");
  write_fault_pairs(data);
  double ms_per_epoch = 0;
  const Outcome reference = reference_run(dir, data, kEpochs, &ms_per_epoch);
  const int pause_ms = 300;

  const uint64_t seed = fault_seed();
  INFO("MIXLAB_FAULT_SEED=" << seed);
  std::mt19937_64 rng(seed);
  const std::string out = dir.file("killed");
  const std::string last = out + "/last.safetensors";
  // Every checkpoint write holds for 300 ms between its complete temporary file and the rename.
  const std::map<std::string, std::string> env{
      {"MIXLAB_FAULT_PAUSE_BEFORE_RENAME", "last.safetensors:" + std::to_string(pause_ms)}};
  int kills = 0, kills_in_write = 0;
  for (int attempt = 0;; ++attempt) {
    REQUIRE(attempt < 40);
    const bool resume = fs::exists(last);
    if (!resume) fs::remove_all(out);  // killed before its first checkpoint: start afresh
    const int remaining_epochs = kEpochs - stored_epoch(last);
    AppProcess p(train_args(data, out, resume), env,
                 dir.file("attempt" + std::to_string(attempt) + ".log"));
    // Eight attempts are killed, and more while the counts below fall short (a run that ends
    // before its kill came does not count).
    const bool kill = attempt < 8 || kills < 4 || kills_in_write < 1;
    if (kill) {
      if (attempt % 2 == 1) {
        // Inside a checkpoint write: as soon as the temporary file of this process appears.
        const std::string temp = temporary_path(last, p.pid());
        while (p.running() && !fs::exists(temp)) sleep_ms(5);
        sleep_ms(static_cast<int>(rng() % 200));
        if (p.running() && fs::exists(temp)) ++kills_in_write;
      } else {
        // Anywhere, but before the run would end by itself: within the first 3/4 of the time its
        // remaining epochs take (each one's compute, as in the reference run, plus its pause).
        // A fixed window let a resumed run with few epochs left finish first, so fewer kills
        // happened than this test checks for.
        const double expected_ms = remaining_epochs * (ms_per_epoch + pause_ms);
        sleep_ms(20 + static_cast<int>(rng() %
                                       static_cast<uint64_t>(std::max(1.0, 0.75 * expected_ms))));
      }
      p.signal(SIGKILL);
    }
    Exit e = p.wait();
    INFO("attempt " << attempt << ": " << e.output);
    if (e.signal == SIGKILL) {
      ++kills;
      continue;
    }
    REQUIRE(e.code == 0);
    if (kill) {
      // It ended before its kill came (a machine less busy than during the reference run ran it
      // faster than the window assumed): a finished run, which must match, and then a fresh one,
      // so that the test still gets its kills (it counted fewer than it checks for, now and then,
      // under the sanitizers' CI load).
      CHECK(same_outcome(outcome(last), reference));
      fs::remove_all(out);
      continue;
    }
    break;
  }
  CHECK(kills >= 4);
  CHECK(kills_in_write >= 1);
  CHECK(same_outcome(outcome(last), reference));
  CHECK(temporaries(out).empty());  // the resumed runs removed what the killed ones left
}

TEST_CASE("faults: a full disk during a checkpoint write keeps the previous checkpoint") {
  TempDir dir;
  const std::string data = dir.file("pairs.tsv");
  write_fault_pairs(data);
  const std::string out = dir.file("run");
  Exit first = mixlab::testing::run_app(train_args(data, out, false, 2), dir.file("first.log"));
  INFO(first.output);
  REQUIRE(first.code == 0);
  const std::string before = read_file(out + "/last.safetensors");

  // The disk fills up: every write of last.safetensors fails after its first 4 KiB.
  Exit full = mixlab::testing::run_app(train_args(data, out, true, 4), dir.file("full.log"),
                                       {{"MIXLAB_FAULT_ENOSPC", "last.safetensors"}});
  INFO(full.output);
  CHECK(full.code != 0);
  CHECK(full.signal == 0);
  CHECK(full.output.find("No space left on device") != std::string::npos);
  CHECK(full.output.find("last.safetensors") != std::string::npos);
  CHECK(read_file(out + "/last.safetensors") == before);
  CHECK(temporaries(out).empty());

  // Space again: the run resumes from the kept checkpoint and finishes.
  Exit again = mixlab::testing::run_app(train_args(data, out, true, 4), dir.file("again.log"));
  INFO(again.output);
  CHECK(again.code == 0);
  CHECK(outcome(out + "/last.safetensors").state[1] == "epoch=4");
}

TEST_CASE("faults: SIGINT and SIGTERM save a checkpoint, exit 130 and 143, and resume exactly") {
  TempDir dir;
  const std::string data = dir.file("pairs.tsv");
  write_fault_pairs(data);
  // A longer run than the other fault tests, and each checkpoint write held 25 ms: on a quiet
  // machine 40 epochs alone trained in 0.2 s, so a signal sent "somewhere in the run" 20-220 ms
  // after it began could arrive after training had ended (4 failures in 20 runs beside another
  // test). The held writes make the run last at least a second on any machine.
  constexpr int kSignalEpochs = 40;
  const std::map<std::string, std::string> slow_writes{
      {"MIXLAB_FAULT_PAUSE_BEFORE_RENAME", "last.safetensors:25"}};
  const Outcome reference = reference_run(dir, data, kSignalEpochs);
  const uint64_t seed = fault_seed();
  INFO("MIXLAB_FAULT_SEED=" << seed);
  std::mt19937_64 rng(seed);
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const std::string out = dir.file("signal" + std::to_string(sig));
    AppProcess p(train_args(data, out, false, kSignalEpochs), slow_writes, out + ".log");
    // Training has started once model.json is written; then stop it somewhere in the run.
    while (p.running() && !fs::exists(out + "/model.json")) sleep_ms(5);
    sleep_ms(20 + static_cast<int>(rng() % 200));
    REQUIRE(p.running());
    p.signal(sig);
    Exit e = p.wait();
    INFO(e.output);
    CHECK(e.code == 128 + sig);
    REQUIRE(fs::exists(out + "/last.safetensors"));
    const Outcome saved = outcome(out + "/last.safetensors");
    CHECK(saved.state[0] != "step=0");
    CHECK(!same_outcome(saved, reference));  // stopped before the end

    Exit resumed =
        mixlab::testing::run_app(train_args(data, out, true, kSignalEpochs), out + "-resume.log");
    INFO(resumed.output);
    CHECK(resumed.code == 0);
    CHECK(same_outcome(outcome(out + "/last.safetensors"), reference));
  }
}
