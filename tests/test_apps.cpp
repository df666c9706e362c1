// The `mixlab` executable through its own entry point: each subcommand on tiny generated data
// for a few steps (the loss falls, a checkpoint is written and reloads, `run` translates
// stdin), and usage errors exit with code 2 and a message.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <regex>
#include <string>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "backends/cpu/simd/kernel_registers.h"
#include "io/run_log.h"
#include "tests/file_helpers.h"

namespace fs = std::filesystem;
using mixlab::testing::contains;
using mixlab::testing::read_file;

namespace {

struct Run {
  int code;
  std::string output;
};

// Runs `mixlab ARGS` (stdout and stderr together), optionally feeding `input` on stdin.
// With `stdout_to`, stdout goes to that file instead and only stderr is captured.
Run run_mixlab(const std::string& args, const std::string& input = "",
               const std::string& stdout_to = "") {
  std::string cmd = std::string(MIXLAB_BINARY_DIR) + "/mixlab " + args + " 2>&1" +
                    (stdout_to.empty() ? std::string() : " >" + stdout_to);
  fs::path in_file;
  if (!input.empty()) {
    in_file = fs::temp_directory_path() / ("mixlab_app_stdin_" + std::to_string(::getpid()));
    std::ofstream(in_file) << input;
    cmd += " < " + in_file.string();
  }
  Run r{0, ""};
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!in_file.empty()) fs::remove(in_file);
  return r;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("mixlab_app_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Every file of a folder with its bytes.
std::map<std::string, std::string> folder_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    files[e.path().filename().string()] = read_file(e.path());
  return files;
}

// A tiny reversal task: "a b c" -> "c b a".
void write_reversal_pairs(const fs::path& file, int n = 200) {
  std::ofstream f(file);
  const char* words[] = {"a", "b", "c", "d"};
  for (int i = 0; i < n; ++i) {
    std::string src, tgt;
    int len = 1 + i % 3;
    for (int t = 0; t < len; ++t) src += std::string(t ? " " : "") + words[(i + t) % 4];
    for (int t = len - 1; t >= 0; --t)
      tgt += std::string(t != len - 1 ? " " : "") + words[(i + t) % 4];
    f << src << "\t" << tgt << "\n";
  }
}

// First and last training loss logged in a run's metrics.csv.
std::pair<double, double> loss_trend(const fs::path& csv) {
  mixlab::MetricsTable t = mixlab::read_metrics_csv(csv.string());
  double first = -1, last = -1;
  for (const auto& row : t.rows) {
    if (row.phase != "train" || !row.values.count("train_loss_window")) continue;
    if (first < 0) first = row.values.at("train_loss_window");
    last = row.values.at("train_loss_window");
  }
  return {first, last};
}

}  // namespace

TEST_CASE("apps: mixlab mixers prints the registry's table") {
  Run r = run_mixlab("mixers");
  CHECK(r.code == 0);
  for (const char* name : {"attention", "synth-mix", "fnet", "linformer", "gmlp", "dynconv"})
    CHECK(r.output.find(name) != std::string::npos);
  CHECK(r.output.find("refuse") != std::string::npos);
  CHECK(r.output.find("(--device): cpu, ref") != std::string::npos);  // the devices it runs on
}

TEST_CASE("apps: usage errors exit with code 2 and a message") {
  Run bad_flag = run_mixlab("classify train --no-such-flag");
  CHECK(bad_flag.code == 2);
  CHECK(bad_flag.output.find("--no-such-flag") != std::string::npos);
  Run bad_mixer = run_mixlab("translate train --mixer no-such-mixer");
  CHECK(bad_mixer.code == 2);
  CHECK(bad_mixer.output.find("unknown mixer 'no-such-mixer'") != std::string::npos);
  Run not_causal = run_mixlab("translate train --decoder-mixer fnet");
  CHECK(not_causal.code == 2);
  CHECK(not_causal.output.find("Mixers that support causal use") != std::string::npos);
  Run bad_option = run_mixlab("classify train --mixer attention --mixer-opt rank=3");
  CHECK(bad_option.code == 2);
  CHECK(run_mixlab("classify").code == 2);  // a subcommand is required
  CHECK(run_mixlab("translate train --help").code == 0);
}

TEST_CASE("apps: classify train eval and predict on a tiny labelled text file") {
  fs::path dir = fresh_dir("classify");
  {
    std::ofstream f(dir / "data.tsv");
    const char* pos[] = {"good great fine", "great good", "fine good nice", "nice great"};
    const char* neg[] = {"bad awful poor", "poor bad", "awful poor sad", "sad bad"};
    for (int i = 0; i < 40; ++i) f << "pos\t" << pos[i % 4] << "\nneg\t" << neg[i % 4] << "\n";
  }
  std::string out = (dir / "run").string();
  Run train =
      run_mixlab("classify train --data " + (dir / "data.tsv").string() +
                 " --mixer gmlp --dim 16 --heads 2 --layers 1 --batch 8 --steps 40 --epochs 10"
                 " --log-every 5 --lr 3e-3 --warmup 5 --dropout 0 --threads 2 --out " +
                 out);
  INFO(train.output);
  REQUIRE(train.code == 0);
  // The model line says where the run computes: the device and the --threads given.
  CHECK(train.output.find(", on cpu, 2 threads\n") != std::string::npos);
  CHECK(fs::exists(fs::path(out) / "best.safetensors"));
  CHECK(fs::exists(fs::path(out) / "config.ini"));
  CHECK(fs::exists(fs::path(out) / "curves.svg"));
  auto [first, last] = loss_trend(fs::path(out) / "metrics.csv");
  CHECK(first > 0);
  CHECK(last < first);
  Run eval = run_mixlab("classify eval --checkpoint " + out + "/best.safetensors --data " +
                        (dir / "data.tsv").string());
  INFO(eval.output);
  CHECK(eval.code == 0);
  CHECK(eval.output.find("test accuracy") != std::string::npos);
  Run predict = run_mixlab("classify predict --checkpoint " + out + "/best.safetensors",
                           "good great\nbad poor\n");
  INFO(predict.output);
  CHECK(predict.code == 0);
  CHECK(predict.output.find("pos\t") != std::string::npos);
  CHECK(predict.output.find("neg\t") != std::string::npos);
  // A line it cannot classify is reported and answered with an empty line; the rest go on.
  Run mixed = run_mixlab("classify predict --checkpoint " + out + "/best.safetensors",
                         "good great\n\nbad poor zebra\n");
  INFO(mixed.output);
  CHECK(mixed.code == 0);
  CHECK(mixed.output.find("warning: line 2: the line is empty; skipped") != std::string::npos);
  CHECK(mixed.output.find("warning: 1 unknown token (zebra) mapped to <unk>") != std::string::npos);
  CHECK(mixed.output.find("pos\t") != std::string::npos);
  CHECK(mixed.output.find("\n\nneg\t") != std::string::npos);
  // The saved configuration reads back through --config.
  Run again =
      run_mixlab("--config " + out + "/config.ini classify train --steps 2 --out " + out + "2");
  INFO(again.output);
  CHECK(again.code == 0);
  fs::remove_all(dir);
}

TEST_CASE("apps: translate train then run translates stdin") {
  fs::path dir = fresh_dir("translate");
  write_reversal_pairs(dir / "pairs.tsv");
  std::string out = (dir / "run").string();
  Run train =
      run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                 " --mixer lightconv --decoder-mixer attention --dim 16 --heads 2 --layers 1"
                 " --batch 16 --steps 40 --log-every 5 --lr 3e-3 --warmup 5 --dropout 0 --out " +
                 out);
  INFO(train.output);
  REQUIRE(train.code == 0);
  CHECK(train.output.find("test exact_match") != std::string::npos);
  CHECK(train.output.find(" parameters, on cpu, ") != std::string::npos);
  // The run ends with its folder, its files and commands to paste.
  CHECK(train.output.find("run folder: " + out) != std::string::npos);
  CHECK(train.output.find("best.safetensors  config.ini") != std::string::npos);
  CHECK(train.output.find("translate run --checkpoint " + out + "/best.safetensors") !=
        std::string::npos);
  // A finished cosine run extended by --resume would go on at the learning rate it ended at
  // (docs/runs.md): the suggestion is the same settings, longer, in a new folder.
  CHECK(train.output.find("--config " + out + "/config.ini translate train --epochs ") !=
        std::string::npos);
  auto [first, last] = loss_trend(fs::path(out) / "metrics.csv");
  CHECK(last < first);
  Run run = run_mixlab("translate run --checkpoint " + out + "/last.safetensors", "a b c\nd\n");
  INFO(run.output);
  CHECK(run.code == 0);
  // One `data:` line (stderr) names the checkpoint's data, then one output line per input line.
  CHECK(run.output.rfind("data: parallel text ", 0) == 0);
  int lines = 0;
  for (char c : run.output) lines += c == '\n';
  CHECK(lines == 3);
  // --batch decodes lines together, printed in their order: the outputs of one at a time.
  const std::string five = "a b c\nd\nc b\na\nd d c\n";
  Run one_by_one =
      run_mixlab("translate run --beam 2 --checkpoint " + out + "/last.safetensors", five);
  Run batched = run_mixlab(
      "translate run --beam 2 --batch 3 --checkpoint " + out + "/last.safetensors", five);
  CHECK(one_by_one.code == 0);
  CHECK(batched.code == 0);
  CHECK(batched.output == one_by_one.output);
  // Without --data, eval scores the checkpoint's own data: the same numbers as naming it.
  Run own = run_mixlab("translate eval --checkpoint " + out + "/best.safetensors");
  Run named = run_mixlab("translate eval --checkpoint " + out + "/best.safetensors --data " +
                         (dir / "pairs.tsv").string());
  INFO(own.output);
  CHECK(own.code == 0);
  CHECK(own.output.find("data: parallel text " + fs::absolute(dir / "pairs.tsv").string()) !=
        std::string::npos);
  CHECK(own.output.find("test exact_match") != std::string::npos);
  CHECK(own.output.substr(own.output.find("test ")) ==
        named.output.substr(named.output.find("test ")));
  Run beam = run_mixlab("translate eval --beam 3 --data " + (dir / "pairs.tsv").string() +
                        " --checkpoint " + out + "/best.safetensors");
  INFO(beam.output);
  CHECK(beam.code == 0);
  Run resume = run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                          " --mixer lightconv --dim 16 --heads 2 --layers 1 --batch 16 --steps 50"
                          " --resume --quiet --out " +
                          out);
  INFO(resume.output);
  CHECK(resume.code == 0);
  CHECK(resume.output.find("resumed from") == std::string::npos);  // --quiet says nothing
  fs::remove_all(dir);
}

TEST_CASE("apps: --padding skip or keep: the same training without dropout, other masks with") {
  // The pairs are 1-3 words long, so batches are padded. Without dropout the two paths train the
  // same function (losses equal to float rounding); with dropout they draw their masks over
  // different layouts (rows or the padded batch), so the losses differ: the option was applied.
  fs::path dir = fresh_dir("padding");
  write_reversal_pairs(dir / "pairs.tsv", 64);
  auto train = [&](const std::string& padding, const std::string& dropout) {
    std::string out = (dir / ("run-" + padding + "-" + dropout)).string();
    Run r = run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                       " --dim 16 --heads 2 --layers 1 --batch 16 --steps 12 --log-every 4"
                       " --eval-every 1000 --quiet --padding " +
                       padding + " --dropout " + dropout + " --out " + out);
    INFO(r.output);
    REQUIRE(r.code == 0);
    return loss_trend(fs::path(out) / "metrics.csv");
  };
  auto [skip_first, skip_last] = train("skip", "0");
  auto [keep_first, keep_last] = train("keep", "0");
  CHECK(skip_first == doctest::Approx(keep_first).epsilon(1e-5));
  CHECK(skip_last == doctest::Approx(keep_last).epsilon(1e-4));
  auto auto_dropout = train("auto", "0.3"), skip_dropout = train("skip", "0.3"),
       keep_dropout = train("keep", "0.3");
  CHECK(auto_dropout == skip_dropout);  // on the CPU auto skips: bit for bit the same run
  CHECK(keep_dropout.second != skip_dropout.second);
  Run bad = run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                       " --padding sometimes --out " + (dir / "bad").string());
  CHECK(bad.code == 2);
  CHECK(bad.output.find("--padding: sometimes not in {auto,skip,keep}") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "bad"));
  fs::remove_all(dir);
}

TEST_CASE("apps: --keep-epochs, mixlab average and ensembles of checkpoints") {
  fs::path dir = fresh_dir("average");
  {
    std::ofstream f(dir / "pairs.tsv");
    const char* words[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 120; ++i)
      f << words[i % 4] << " " << words[(i / 4) % 4] << "\t" << words[(i / 4) % 4] << " "
        << words[i % 4] << "\n";
  }
  std::string out = (dir / "run").string();
  auto train = [&](const std::string& dim, const std::string& to) {
    return run_mixlab("translate train --data " + (dir / "pairs.tsv").string() + " --dim " + dim +
                      " --heads 2 --layers 1 --batch 16 --epochs 3 --keep-epochs 2 --quiet --out " +
                      to);
  };
  Run run = train("16", out);
  INFO(run.output);
  REQUIRE(run.code == 0);
  CHECK_FALSE(fs::exists(out + "/epoch-1.safetensors"));  // only the last two are kept
  REQUIRE(fs::exists(out + "/epoch-2.safetensors"));
  REQUIRE(fs::exists(out + "/epoch-3.safetensors"));
  Run avg = run_mixlab("average --out " + out + "/avg.safetensors " + out +
                       "/epoch-2.safetensors " + out + "/epoch-3.safetensors");
  INFO(avg.output);
  CHECK(avg.code == 0);
  Run eval = run_mixlab("translate eval --data " + (dir / "pairs.tsv").string() + " --checkpoint " +
                        out + "/avg.safetensors");
  INFO(eval.output);
  CHECK(eval.code == 0);
  CHECK(eval.output.find("test exact_match") != std::string::npos);
  Run valid = run_mixlab("translate eval --on valid --data " + (dir / "pairs.tsv").string() +
                         " --checkpoint " + out + "/avg.safetensors");
  INFO(valid.output);
  CHECK(valid.code == 0);
  CHECK(valid.output.find("valid exact_match") != std::string::npos);

  // One file is a usage error; checkpoints of two different models are refused by name.
  CHECK(
      run_mixlab("average --out " + out + "/x.safetensors " + out + "/epoch-3.safetensors").code ==
      2);
  REQUIRE(train("8", out + "-narrow").code == 0);
  Run mixed = run_mixlab("average --out " + out + "/x.safetensors " + out +
                         "/epoch-3.safetensors " + out + "-narrow/epoch-3.safetensors");
  CHECK(mixed.code == 1);
  CHECK(mixed.output.find("is [") != std::string::npos);
  CHECK_FALSE(fs::exists(out + "/x.safetensors"));

  // Models of different widths on the same data decode together as an ensemble.
  Run ensemble = run_mixlab("translate eval --beam 2 --data " + (dir / "pairs.tsv").string() +
                            " --checkpoint " + out + "/epoch-3.safetensors --checkpoint " + out +
                            "-narrow/epoch-3.safetensors");
  INFO(ensemble.output);
  CHECK(ensemble.code == 0);
  CHECK(ensemble.output.find("test exact_match") != std::string::npos);
  Run ensemble_run = run_mixlab("translate run --checkpoint " + out + "/epoch-3.safetensors " +
                                    out + "-narrow/epoch-3.safetensors",
                                "a b\nc d\n");
  INFO(ensemble_run.output);
  CHECK(ensemble_run.code == 0);
  // A model with other vocabularies is refused by name.
  {
    std::ofstream f(dir / "other.tsv");
    for (int i = 0; i < 40; ++i) f << "p q\tq p\n";
  }
  REQUIRE(run_mixlab("translate train --data " + (dir / "other.tsv").string() +
                     " --dim 16 --heads 2 --layers 1 --batch 16 --steps 2 --quiet --out " + out +
                     "-other")
              .code == 0);
  Run foreign =
      run_mixlab("translate eval --data " + (dir / "pairs.tsv").string() + " --checkpoint " + out +
                 "/epoch-3.safetensors --checkpoint " + out + "-other/last.safetensors");
  CHECK(foreign.code == 2);
  CHECK(foreign.output.find("other vocabularies") != std::string::npos);
  fs::remove_all(dir);
  fs::remove_all(out + "-narrow");
  fs::remove_all(out + "-other");
}

TEST_CASE("apps: g2p holds out the same dev words whatever the seed") {
  fs::path dir = fresh_dir("g2p-dev");
  std::string out = (dir / "run").string();
  Run train = run_mixlab(
      "translate train --data g2p --train-limit 300 --steps 2 --dim 8 --heads 2 --layers 1 "
      "--max-output 3 --seed 3 --quiet --out " +
      out);
  INFO(train.output);
  REQUIRE(train.code == 0);
  auto valid = [&](const std::string& seed) {
    Run r = run_mixlab("translate eval --on valid --max-output 3 --seed " + seed +
                       " --checkpoint " + out + "/last.safetensors");
    INFO(r.output);
    CHECK(r.code == 0);
    return r.output.substr(std::min(r.output.size(), r.output.find("valid ")));  // past data:
  };
  std::string a = valid("0");
  CHECK(a.find("valid wer") != std::string::npos);
  CHECK(valid("7") == a);
  fs::remove_all(dir);
}

TEST_CASE("apps: classify on generated ListOps runs a few steps") {
  fs::path dir = fresh_dir("listops");
  Run r = run_mixlab(
      "classify train --data listops --listops-train 200 --listops-len 40 --mixer fnet"
      " --dim 16 --heads 2 --layers 1 --steps 5 --batch 16 --quiet --out " +
      (dir / "run").string());
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("test accuracy") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: Ctrl-C during training saves a checkpoint and exits with 130") {
  fs::path dir = fresh_dir("interrupt");
  std::string out = (dir / "run").string();
  std::string binary = std::string(MIXLAB_BINARY_DIR) + "/mixlab";
  std::vector<std::string> args{binary,    "translate", "train",    "--dim", "16",
                                "--heads", "2",         "--layers", "1",     "--epochs",
                                "50",      "--quiet",   "--out",    out};
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  // Wait until training has started, then interrupt it: the trainer takes Ctrl-C over before it
  // opens metrics.csv, so from then on a signal stops the run after a step, which saves.
  for (int i = 0; i < 1200 && !fs::exists(fs::path(out) / "metrics.csv"); ++i) ::usleep(50000);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(fs::exists(fs::path(out) / "last.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("apps: MIXLAB_DEBUG traces kernels and reports their time") {
  Run r = run_mixlab(
      "classify train --data listops --listops-train 100 --listops-len 30 --dim 16"
      " --heads 2 --layers 1 --steps 2 --quiet --out /tmp/mixlab_debug_" +
      std::to_string(::getpid()));
  CHECK(r.code == 0);
  CHECK(r.output.find("[mixlab cpu] gemm") == std::string::npos);  // off by default
  ::setenv("MIXLAB_DEBUG", "2", 1);
  Run traced = run_mixlab(
      "classify train --data listops --listops-train 100 --listops-len 30"
      " --dim 16 --heads 2 --layers 1 --steps 2 --quiet --overwrite --out /tmp/mixlab_debug_" +
      std::to_string(::getpid()));
  ::unsetenv("MIXLAB_DEBUG");
  fs::remove_all("/tmp/mixlab_debug_" + std::to_string(::getpid()));
  CHECK(traced.code == 0);
  CHECK(traced.output.find("[mixlab cpu] gemm") != std::string::npos);
  CHECK(traced.output.find("kernel time by kernel") != std::string::npos);
  // The attention core's own products, from its cycle counters (backends/kernel_products.h).
  CHECK(traced.output.find("matrix products inside fused kernels") != std::string::npos);
}

TEST_CASE("apps: MIXLAB_ATTENTION_CORE=math runs the equation's kernels, same losses") {
  // The translator takes every attention path: self-attention on the real tokens' rows, causal
  // self-attention, and cross-attention. Math runs no fused core (the kernel trace shows
  // softmax_backward and no attention kernel) and trains to the fused run's losses up to float32
  // rounding.
  fs::path dir = fresh_dir("attention_core");
  write_reversal_pairs(dir / "pairs.tsv", 64);
  auto train = [&](const char* core) {
    std::string out = (dir / (std::string("run-") + core)).string();
    ::setenv("MIXLAB_ATTENTION_CORE", core, 1);
    ::setenv("MIXLAB_DEBUG", "2", 1);
    Run r = run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                       " --dim 16 --heads 2 --layers 1 --batch 16 --steps 6 --log-every 3"
                       " --eval-every 1000 --dropout 0 --quiet --threads 1 --out " +
                       out);
    ::unsetenv("MIXLAB_DEBUG");
    ::unsetenv("MIXLAB_ATTENTION_CORE");
    INFO(r.output);
    REQUIRE(r.code == 0);
    return std::make_pair(r.output, loss_trend(fs::path(out) / "metrics.csv"));
  };
  auto [fused_trace, fused_loss] = train("fused");
  auto [math_trace, math_loss] = train("math");
  CHECK(contains(fused_trace, "[mixlab cpu] attention "));
  CHECK_FALSE(contains(math_trace, "[mixlab cpu] attention "));
  CHECK(contains(math_trace, "[mixlab cpu] softmax_backward "));
  CHECK(math_loss.first == doctest::Approx(fused_loss.first).epsilon(1e-5));
  CHECK(math_loss.second == doctest::Approx(fused_loss.second).epsilon(1e-4));
  // A value it does not know is a usage error before anything is written.
  ::setenv("MIXLAB_ATTENTION_CORE", "flash", 1);
  Run bad = run_mixlab("translate train --data " + (dir / "pairs.tsv").string() + " --out " +
                       (dir / "bad").string());
  ::unsetenv("MIXLAB_ATTENTION_CORE");
  CHECK(bad.code == 2);
  CHECK(contains(bad.output, "MIXLAB_ATTENTION_CORE: unknown attention core 'flash'"));
  CHECK_FALSE(fs::exists(dir / "bad"));
  fs::remove_all(dir);
}

TEST_CASE("apps: a run folder is refused without --resume and left byte-identical") {
  fs::path dir = fresh_dir("refuse");
  write_reversal_pairs(dir / "pairs.tsv");
  std::string out = (dir / "run").string();
  std::string tiny = " --dim 8 --heads 2 --layers 1 --batch 16 --steps 3 --quiet --threads 1";
  REQUIRE(
      run_mixlab("translate train --data " + (dir / "pairs.tsv").string() + tiny + " --out " + out)
          .code == 0);
  auto before = folder_files(out);
  REQUIRE(before.count("last.safetensors"));
  Run again = run_mixlab("translate train --data " + (dir / "pairs.tsv").string() + tiny +
                         " --mixer gmlp --out " + out);
  CHECK(again.code == 2);
  CHECK(again.output.find("already holds a run") != std::string::npos);
  CHECK(folder_files(out) == before);
  // --resume and --overwrite together, and --resume on an empty folder, are usage errors too.
  CHECK(run_mixlab("translate train --resume --overwrite --out " + out).code == 2);
  CHECK(folder_files(out) == before);
  Run nothing = run_mixlab("translate train --resume --out " + (dir / "empty").string());
  CHECK(nothing.code == 2);
  CHECK(nothing.output.find("no last.safetensors") != std::string::npos);
  // --overwrite replaces the run: the new model is the one in model.json, one run in metrics.
  Run replaced = run_mixlab("translate train --data " + (dir / "pairs.tsv").string() + tiny +
                            " --mixer gmlp --log-every 1 --overwrite --out " + out);
  INFO(replaced.output);
  REQUIRE(replaced.code == 0);
  CHECK(read_file(fs::path(out) / "model.json").find("\"mixer\":\"gmlp\"") != std::string::npos);
  int steps_logged = 0;
  for (const auto& row : mixlab::read_metrics_csv(out + "/metrics.csv").rows)
    steps_logged += row.phase == "train";
  CHECK(steps_logged == 3);
  // A folder holding other files is never emptied.
  std::ofstream(fs::path(out) / "notes.txt") << "mine";
  CHECK(run_mixlab("translate train --data " + (dir / "pairs.tsv").string() + tiny +
                   " --overwrite --out " + out)
            .code == 2);
  CHECK(fs::exists(fs::path(out) / "notes.txt"));
  fs::remove_all(dir);
}

TEST_CASE("apps: --resume alone continues the stored run and contradicting flags are refused") {
  fs::path dir = fresh_dir("resume");
  write_reversal_pairs(dir / "pairs.tsv");
  std::string out = (dir / "run").string();
  REQUIRE(run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                     " --mixer gmlp --dim 12 --heads 2 --layers 1 --batch 16 --steps 4"
                     " --log-every 1 --quiet --threads 1 --out " +
                     out)
              .code == 0);
  const std::string model = read_file(fs::path(out) / "model.json");
  Run resumed = run_mixlab("translate train --resume --steps 7 --out " + out);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  CHECK(read_file(fs::path(out) / "model.json") == model);  // gmlp, width 12, same vocab
  CHECK(resumed.output.find("gmlp encoder") != std::string::npos);
  CHECK(resumed.output.find("pairs.tsv") != std::string::npos);  // the stored data
  // The summary's steps row (its width follows the longest row name).
  CHECK(std::regex_search(resumed.output, std::regex("\nsteps +7\n")));
  Run clash =
      run_mixlab("translate train --resume --steps 9 --mixer attention --dim 16 --out " + out);
  CHECK(clash.code == 2);
  CHECK(clash.output.find("--dim 16, but the run has dim=12") != std::string::npos);
  CHECK(clash.output.find("--mixer attention, but the run has mixer=") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: --config DIR/config.ini reproduces a run bit for bit") {
  fs::path dir = fresh_dir("config");
  write_reversal_pairs(dir / "pairs.tsv");
  std::string a = (dir / "a").string(), b = (dir / "b").string();
  REQUIRE(run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                     " --mixer lightconv --mixer-opt kernel=3 --dim 8 --heads 2 --layers 1"
                     " --batch 16 --steps 5 --lr 2e-3 --seed 4 --quiet --threads 1 --out " +
                     a)
              .code == 0);
  CHECK(read_file(fs::path(a) / "config.ini").find("[translate.train]") != std::string::npos);
  CHECK(read_file(fs::path(a) / "config.ini").find("out=\"" + a + "\"") != std::string::npos);
  Run replay = run_mixlab("--config " + a + "/config.ini translate train --out " + b);
  INFO(replay.output);
  REQUIRE(replay.code == 0);
  CHECK(read_file(fs::path(a) / "last.safetensors") == read_file(fs::path(b) / "last.safetensors"));
  CHECK(read_file(fs::path(a) / "model.json") == read_file(fs::path(b) / "model.json"));
  // A file for another command would apply nothing: refused.
  Run wrong = run_mixlab("--config " + a + "/config.ini classify train --out " + b + "x");
  CHECK(wrong.code == 2);
  CHECK(wrong.output.find("no [classify.train] section") != std::string::npos);
  CHECK_FALSE(fs::exists(b + "x"));
  fs::remove_all(dir);
}

TEST_CASE("apps: classify eval scores a file with the checkpoint's vocabulary and labels") {
  fs::path dir = fresh_dir("classify-vocab");
  const char* pos[] = {"good great fine", "great good", "fine good nice", "nice great"};
  const char* neg[] = {"bad awful poor", "poor bad", "awful poor sad", "sad bad"};
  // Two files with the same held-out lines (the last 10%) but other training lines: new words,
  // which would renumber a vocabulary built from the file, and a new label.
  auto write = [&](const fs::path& file, bool other) {
    std::ofstream f(file);
    for (int i = 0; i < 36; ++i) {
      if (other)
        f << (i % 2 ? "meh\tzebra aardvark " : "neg\tabacus ") << neg[i % 4] << "\n";
      else
        f << "pos\t" << pos[i % 4] << "\nneg\t" << neg[i % 4] << "\n";
    }
    if (other)
      for (int i = 0; i < 36; ++i) f << "pos\t" << pos[i % 4] << "\n";
    for (int i = 0; i < 4; ++i) f << "pos\t" << pos[i] << " bad\nneg\t" << neg[i] << " fine\n";
  };
  write(dir / "a.tsv", false);
  write(dir / "b.tsv", true);
  std::string out = (dir / "run").string();
  Run train = run_mixlab("classify train --data " + (dir / "a.tsv").string() +
                         " --dim 16 --heads 2 --layers 1 --batch 8 --steps 6 --quiet --threads 1"
                         " --out " +
                         out);
  INFO(train.output);
  REQUIRE(train.code == 0);
  auto scores = [&](const std::string& data) {
    Run r = run_mixlab("classify eval --checkpoint " + out + "/last.safetensors" + data);
    INFO(r.output);
    CHECK(r.code == 0);
    REQUIRE(r.output.find("test loss") != std::string::npos);
    return r.output.substr(r.output.find("test "));
  };
  std::string own = scores("");
  CHECK(scores(" --data " + (dir / "a.tsv").string()) == own);
  CHECK(scores(" --data " + (dir / "b.tsv").string()) == own);
  fs::remove_all(dir);
}

TEST_CASE("apps: each usage error exits 2 with its message before anything is written") {
  fs::path dir = fresh_dir("usage");
  write_reversal_pairs(dir / "pairs.tsv", 40);
  const std::string out = (dir / "run").string();
  const std::string base = "translate train --data " + (dir / "pairs.tsv").string() +
                           " --dim 8 --heads 2 --layers 1 --steps 1 --quiet --out " + out + " ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--mixer synth-frandom --mixer-opt rank=abc",
       "option rank=abc is not an integer; allowed: an integer in [1, 65536]"},
      {"--mixer synth-mix:R+X", "unknown synthesizer component 'X'"},
      {"--mixer lightconv --mixer-opt kernel=100001",
       "option kernel=100001 is out of range; allowed: an integer in [1, 255]"},
      {"--optimizer adamx", "--optimizer: adamx not in"},
      {"--schedule foo", "--schedule: foo not in"},
      {"--pos abs", "--pos: abs not in"},
      {"--split nope", "--split: nope not in"},
      {"--tokens bytes", "--tokens: bytes not in"},
      {"--device tpu", "--device"},
      {"--layers -1", "--layers: Value -1 not in range"},
      {"--steps -5", "--steps: -5 is negative"},
      {"--threads -3", "--threads: '-3' is not a whole number of threads from 1 to 256"},
      {"--threads 1000", "--threads: '1000' is not a whole number of threads from 1 to 256"},
      {"--epochs 0", "--epochs: Value 0 not in range"},
      {"--mixr gmlp", "did you mean '--mixer'?"},
  };
  for (const auto& c : cases) {
    const std::string& flags = c.first;  // not a structured binding: INFO captures it (clang)
    const std::string& message = c.second;
    Run r = run_mixlab(base + flags);
    INFO(flags << "\n" << r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find(message) != std::string::npos);
    CHECK_FALSE(fs::exists(out));  // refused before any file was written
  }
  Run pool = run_mixlab("classify train --pool max --out " + out);
  CHECK(pool.code == 2);
  CHECK(pool.output.find("--pool: max not in") != std::string::npos);
  Run command = run_mixlab("tranlate train");
  CHECK(command.code == 2);
  CHECK(command.output.find("did you mean 'translate'?") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: --version, option groups, and inference commands without training flags") {
  Run version = run_mixlab("--version");
  CHECK(version.code == 0);
  CHECK(version.output.rfind("mixlab ", 0) == 0);
  CHECK(version.output.find("git ") != std::string::npos);
  CHECK(version.output.find(" build, CPU kernels ") != std::string::npos);
  CHECK(version.output.find("devices cpu, ref") != std::string::npos);
  CHECK(version.output.find(std::string("CPU kernels ") + mixlab::cpu::kernel_registers() +
                            ", CUDA o") != std::string::npos);
  Run help = run_mixlab("translate train --help");
  size_t last = 0;
  for (const char* group : {"Data:", "Model:", "Optimisation:", "Decoding:", "Output:", "Run:"}) {
    size_t at = help.output.find(std::string("\n") + group);
    INFO(group);
    REQUIRE(at != std::string::npos);
    CHECK(at > last);  // in this order
    last = at;
  }
  CHECK(help.output.find("--out TEXT=runs/translate") != std::string::npos);  // defaults shown
  for (const char* command : {"translate run", "classify predict", "translate eval"}) {
    Run r = run_mixlab(std::string(command) + " --help");
    INFO(command);
    for (const char* training : {"--lr", "--epochs", "--out", "--resume", "--mixer "})
      CHECK(r.output.find(training) == std::string::npos);
  }
}

TEST_CASE("apps: output that cannot be written, and a finite loss explosion, fail loudly") {
  fs::path dir = fresh_dir("fail-loudly");
  write_reversal_pairs(dir / "pairs.tsv", 60);
  std::string out = (dir / "run").string();
  REQUIRE(run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                     " --dim 8 --heads 2 --layers 1 --steps 2 --quiet --out " + out)
              .code == 0);
  Run full = run_mixlab("translate run --checkpoint " + out + "/last.safetensors", "a b\nc\n",
                        "/dev/full");
  INFO(full.output);
  CHECK(full.code == 1);
  CHECK(full.output.find("cannot write to standard output") != std::string::npos);
  CHECK(run_mixlab("mixers", "", "/dev/full").code == 1);

  // SGD at lr 1000 without clipping: the loss grows by orders of magnitude within a few steps
  // while staying finite. Training stops before that update; best.safetensors stays loadable.
  std::ofstream(dir / "cls.tsv") << "pos\tgood great\nneg\tbad poor\npos\tfine good\n"
                                    "neg\tsad bad\npos\tnice\nneg\tawful\npos\tgreat\n"
                                    "neg\tpoor\npos\tgood\nneg\tbad\npos\tfine\nneg\tsad\n";
  std::string boom = (dir / "boom").string();
  Run exploded = run_mixlab("classify train --data " + (dir / "cls.tsv").string() +
                            " --dim 16 --heads 2 --layers 1 --batch 4 --steps 40 --optimizer sgd"
                            " --lr 1000 --clip 0 --warmup 1 --schedule constant --eval-every 1"
                            " --quiet --out " +
                            boom);
  INFO(exploded.output);
  CHECK(exploded.code == 1);
  // Stopped by the training loss or, when an evaluation sees it first, the validation loss or
  // the weights' growth.
  CHECK(exploded.output.find("training diverged: the") != std::string::npos);
  CHECK(std::regex_search(
      exploded.output,
      std::regex(" times (its first value|the first training loss)|times\\) by step")));
  if (fs::exists(boom + "/best.safetensors")) {
    Run eval = run_mixlab("classify eval --checkpoint " + boom + "/best.safetensors");
    INFO(eval.output);
    CHECK(eval.code == 0);
    CHECK(eval.output.find("test loss inf") == std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("apps: metrics.csv has one epoch numbering, test rows last, time and throughput") {
  fs::path dir = fresh_dir("metrics");
  write_reversal_pairs(dir / "pairs.tsv", 80);
  std::string out = (dir / "run").string();
  const std::string train = "translate train --data " + (dir / "pairs.tsv").string() +
                            " --dim 8 --heads 2 --layers 1 --batch 16 --epochs 2 --log-every 1"
                            " --quiet --threads 1 --out " +
                            out;
  REQUIRE(run_mixlab(train + " --steps 3").code == 0);
  const std::string at_step_3 = read_file(fs::path(out) / "last.safetensors");
  REQUIRE(run_mixlab("translate train --resume --out " + out + " --steps 8").code == 0);
  // As if the run had been killed after its step-3 checkpoint: resume from it again.
  std::ofstream(fs::path(out) / "last.safetensors", std::ios::binary) << at_step_3;
  Run resumed = run_mixlab("translate train --resume --out " + out + " --steps 8");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  mixlab::MetricsTable t = mixlab::read_metrics_csv(out + "/metrics.csv");
  CHECK(std::find(t.columns.begin(), t.columns.end(), "time_s") != t.columns.end());
  CHECK(std::find(t.columns.begin(), t.columns.end(), "examples/s") != t.columns.end());
  std::vector<int64_t> train_steps;
  int64_t last_train_epoch = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    if (row.phase == "train") {
      train_steps.push_back(row.step);
      last_train_epoch = row.epoch;
      CHECK(row.values.count("examples/s"));
    }
    if (row.phase == "valid") CHECK(row.epoch == last_train_epoch);  // same numbering
    if (row.phase == "test") CHECK(i + 1 == t.rows.size());          // one test row, last
    CHECK(row.epoch >= 1);
  }
  CHECK(train_steps == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8});  // none repeated
  // metrics.jsonl holds the same records.
  std::istringstream jsonl(read_file(fs::path(out) / "metrics.jsonl"));
  size_t records = 0;
  for (std::string line; std::getline(jsonl, line);) ++records;
  CHECK(records == t.rows.size());
  fs::remove_all(dir);
}
