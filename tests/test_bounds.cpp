// Sizes and counts that come from the user are bounded and refused with a message, never left to
// hang or to end in std::bad_alloc: thread counts (a pool that cannot start its threads ends
// with an Error), the length a model takes from its data, the memory a configuration asks for,
// and a run whose validation loss exploded writes no best checkpoint.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "nn/model_size.h"
#include "tests/app_runner.h"
#include "tests/temp_dir.h"
#include "train/data/text_files.h"

using namespace mixlab;
namespace fs = std::filesystem;

namespace {

// A labelled-text file of `lines` short lines over two labels, and optionally one long line.
std::string bounds_tsv(const testing::TempDir& tmp, int lines, int long_line_tokens = 0) {
  const std::string path = tmp.file("data.tsv");
  std::ofstream f(path);
  const char* words[] = {"red", "green", "blue", "dark", "light", "warm"};
  for (int i = 0; i < lines; ++i) {
    f << (i % 2 ? "even" : "odd") << "\t";
    for (int t = 0; t < 3 + i % 3; ++t) f << (t ? " " : "") << words[(i + t) % 6];
    f << "\n";
    if (long_line_tokens > 0 && i == 5) {  // line 7 of the file
      f << "odd\t";
      for (int t = 0; t < long_line_tokens; ++t) f << (t ? " " : "") << words[t % 6];
      f << "\n";
    }
  }
  return path;
}

std::vector<std::string> tiny_train(const std::string& data, const std::string& out) {
  return {"classify", "train", "--data",  data, "--dim",   "8",     "--heads", "2", "--layers", "1",
          "--batch",  "4",     "--steps", "2",  "--quiet", "--out", out};
}

}  // namespace

TEST_CASE("bounds: a thread count is a whole number from 1 to kMaxThreads") {
  for (const char* good : {"1", "2", "256"}) CHECK(thread_count_problem(good).empty());
  for (const char* bad : {"0", "-3", "257", "100000", "abc", "", "4x", "+2", " 2"})
    CHECK(thread_count_problem(bad) ==
          std::string("'") + bad + "' is not a whole number of threads from 1 to 256");
  CHECK(parse_thread_count("12", "--threads") == 12);
  CHECK_THROWS_WITH_AS(parse_thread_count("0", "MIXLAB_NUM_THREADS"),
                       "MIXLAB_NUM_THREADS: '0' is not a whole number of threads from 1 to 256",
                       Error);
  CHECK_THROWS_AS(set_num_threads(0), Error);
  CHECK_THROWS_AS(set_num_threads(kMaxThreads + 1), Error);
}

TEST_CASE("bounds: a pool whose threads the system refuses ends with an Error, not a hang") {
  const int saved = num_threads();
  set_num_threads(1);                      // no helper threads: the next count starts them anew
  testing::fail_thread_creation_after(2);  // the third helper (thread 4 of 8) is refused
  std::string message;
  try {
    set_num_threads(8);
  } catch (const Error& e) {
    message = e.what();
  }
  testing::fail_thread_creation_after(-1);
  CHECK(message.find("cannot start 8 CPU threads: the system refused thread 4") !=
        std::string::npos);
  CHECK(message.find("--threads or MIXLAB_NUM_THREADS") != std::string::npos);
  // The helpers that did start were stopped; the engine goes on with one thread and computes.
  CHECK(num_threads() == 1);
  std::vector<int> hits(1000, 0);
  parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  CHECK(std::count(hits.begin(), hits.end(), 1) == 1000);
  // Once threads can be created again, the count is taken as asked.
  set_num_threads(3);
  CHECK(num_threads() == 3);
  std::fill(hits.begin(), hits.end(), 0);
  parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  CHECK(std::count(hits.begin(), hits.end(), 1) == 1000);
  set_num_threads(saved);
}

TEST_CASE("bounds: bad --threads and MIXLAB_NUM_THREADS are usage errors that write nothing") {
  testing::TempDir tmp;
  const std::string data = bounds_tsv(tmp, 20);
  int i = 0;
  for (const std::string value : {"0", "-3", "100000", "abc"}) {
    const std::string out = tmp.file("out" + std::to_string(i++));
    std::vector<std::string> args = tiny_train(data, out);
    args.insert(args.end(), {"--threads", value});
    testing::Exit e = testing::run_app(args, tmp.file("threads.log"));
    INFO("--threads " << value << "\n" << e.output);
    CHECK(e.code == 2);
    CHECK(e.output.find("--threads: '" + value +
                        "' is not a whole number of threads from 1 to 256") != std::string::npos);
    CHECK_FALSE(fs::exists(out));
    // inspect takes the same flag with the same range.
    testing::Exit inspect =
        testing::run_app({"inspect", "--checkpoint", tmp.file("none.safetensors"), "--input", "a",
                          "--out", out, "--threads", value},
                         tmp.file("inspect.log"));
    INFO("inspect --threads " << value << "\n" << inspect.output);
    CHECK(inspect.code == 2);
    CHECK(inspect.output.find("--threads: '" + value + "'") != std::string::npos);
    CHECK_FALSE(fs::exists(out));
    // The variable, for every command.
    testing::Exit env = testing::run_app(tiny_train(data, out), tmp.file("env.log"),
                                         {{"MIXLAB_NUM_THREADS", value}});
    INFO("MIXLAB_NUM_THREADS=" << value << "\n" << env.output);
    CHECK(env.code == 2);
    CHECK(env.output.find("MIXLAB_NUM_THREADS: '" + value +
                          "' is not a whole number of threads from 1 to 256") != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("bounds: a data line longer than the cap is refused, naming the file and line") {
  testing::TempDir tmp;
  const std::string data = bounds_tsv(tmp, 20, 5000);
  // The reader: the longest line, by number, unless the caller raises the cap.
  CHECK_THROWS_WITH_AS(
      read_labelled_text(data),
      doctest::Contains((data + ":7: the longest example has 5000 tokens, more than 4096").c_str()),
      Error);
  CHECK(read_labelled_text(data, Tokenization::kWords, 5000).size() == 21);
  // The command: no run folder, no model sized to it.
  const std::string out = tmp.file("run");
  testing::Exit e = testing::run_app(tiny_train(data, out), tmp.file("long.log"));
  INFO(e.output);
  CHECK(e.code == 1);
  CHECK(e.output.find(data + ":7: the longest example has 5000 tokens, more than 4096") !=
        std::string::npos);
  CHECK(e.output.find("--max-len 5000") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("bounds: a model too big for memory is refused before it is allocated") {
  ModelConfig c;
  c.task = ModelTask::Classify;
  c.vocab = 10;
  c.classes = 2;
  c.max_len = 1000000000000;  // max_len=1e12 in a config file
  CHECK_THROWS_WITH_AS(check_model_size(c, 1e9), doctest::Contains("position tables"), Error);
  CHECK_THROWS_WITH_AS(check_model_size(c, 1e9), doctest::Contains("--max-len"), Error);
  c.max_len = 16;
  check_model_size(c, 1e9);  // the default model fits in a gigabyte
  c.dim = 65536;
  CHECK_THROWS_WITH_AS(check_model_size(c, 1e12), doctest::Contains("FFN weights"), Error);
  CHECK_THROWS_WITH_AS(check_model_size(c, 1e12), doctest::Contains("--dim 65536"), Error);
  // The command line: a usage error naming the flag, no std::bad_alloc, no run folder.
  testing::TempDir tmp;
  const std::string data = bounds_tsv(tmp, 20), out = tmp.file("run");
  std::vector<std::string> args = tiny_train(data, out);
  args.insert(args.end(), {"--dim", "65536", "--heads", "1"});
  testing::Exit e = testing::run_app(args, tmp.file("dim.log"));
  INFO(e.output);
  CHECK(e.code == 2);
  CHECK(e.output.find("the model is too big") != std::string::npos);
  CHECK(e.output.find("--dim 65536") != std::string::npos);
  CHECK(e.output.find("bad_alloc") == std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(out) / "best.safetensors"));
}

TEST_CASE("bounds: a batch too big for memory, and a ListOps length above the cap, are refused") {
  ModelConfig c;
  c.task = ModelTask::Classify;
  c.vocab = 10;
  c.classes = 2;
  c.max_len = 100;  // d = 64, f = 256: 512 activations of 4 bytes per token and block
  check_batch_size(c, 64, 1e9);
  CHECK_THROWS_WITH_AS(check_batch_size(c, 1 << 20, 1e9),
                       doctest::Contains("--batch 1048576 is too big"), Error);
  testing::TempDir tmp;
  const std::string data = bounds_tsv(tmp, 20), out = tmp.file("run");
  std::vector<std::string> args = tiny_train(data, out);
  args.insert(args.end(), {"--batch", "1048576", "--dim", "512", "--max-len", "65536"});
  testing::Exit e = testing::run_app(args, tmp.file("batch.log"));
  INFO(e.output);
  CHECK(e.code == 2);
  CHECK(e.output.find("--batch 1048576 is too big") != std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(out) / "best.safetensors"));
  // Generated data: refused from the flags, before a single expression is generated.
  testing::Exit listops = testing::run_app(
      {"classify", "train", "--data", "listops", "--listops-len", "5000", "--out", out},
      tmp.file("listops.log"));
  INFO(listops.output);
  CHECK(listops.code == 2);
  CHECK(listops.output.find("--listops-len 5000 is more than 4096") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("bounds: a run whose validation loss explodes writes no best checkpoint") {
  testing::TempDir tmp;
  const std::string data = bounds_tsv(tmp, 40), out = tmp.file("run");
  std::vector<std::string> args = tiny_train(data, out);
  args.insert(args.end(), {"--steps", "1", "--lr", "1e6", "--warmup", "0", "--threads", "1"});
  testing::Exit e = testing::run_app(args, tmp.file("lr.log"));
  INFO(e.output);
  CHECK(e.code == 1);
  CHECK(e.output.find("training diverged") != std::string::npos);
  CHECK(e.output.find("at step 1") != std::string::npos);
  CHECK(e.output.find("no best checkpoint was written") != std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(out) / "best.safetensors"));
}

TEST_CASE(
    "bounds: weights blown up by one step are refused as best even when the loss looks fine") {
  // With the default warm-up the first step's rate is 1e6/100: the validation loss can come out
  // finite, even 0 (every answer certain), while the weights grew a million times over.
  testing::TempDir tmp;
  const std::string data = bounds_tsv(tmp, 40), out = tmp.file("run");
  std::vector<std::string> args = tiny_train(data, out);
  args.insert(args.end(), {"--steps", "1", "--lr", "1e6", "--threads", "1"});
  testing::Exit e = testing::run_app(args, tmp.file("rms.log"));
  INFO(e.output);
  CHECK(e.code == 1);
  CHECK(e.output.find("training diverged") != std::string::npos);
  CHECK(e.output.find("no best checkpoint was written") != std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(out) / "best.safetensors"));
}
