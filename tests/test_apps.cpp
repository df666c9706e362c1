// The `mixlab` executable through its own entry point: each subcommand on tiny generated data
// for a few steps (the loss falls, a checkpoint is written and reloads, `run` translates
// stdin), and usage errors exit with code 2 and a message.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "io/run_log.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  int code;
  std::string output;
};

// Runs `mixlab ARGS` (stdout and stderr together), optionally feeding `input` on stdin.
Run run_mixlab(const std::string& args, const std::string& input = "") {
  std::string cmd = std::string(MIXLAB_BINARY_DIR) + "/mixlab " + args + " 2>&1";
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

// First and last training loss logged in a run's metrics.csv.
std::pair<double, double> loss_trend(const fs::path& csv) {
  mixlab::MetricsTable t = mixlab::read_metrics_csv(csv.string());
  double first = -1, last = -1;
  for (const auto& row : t.rows) {
    if (row.phase != "train" || !row.values.count("loss")) continue;
    if (first < 0) first = row.values.at("loss");
    last = row.values.at("loss");
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
                 " --log-every 5 --lr 3e-3 --warmup 5 --dropout 0 --out " +
                 out);
  INFO(train.output);
  REQUIRE(train.code == 0);
  CHECK(fs::exists(fs::path(out) / "best.safetensors"));
  CHECK(fs::exists(fs::path(out) / "config.ini"));
  CHECK(fs::exists(fs::path(out) / "curves.png"));
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
  // The saved configuration reads back through --config.
  Run again =
      run_mixlab("--config " + out + "/config.ini classify train --steps 2 --out " + out + "2");
  INFO(again.output);
  CHECK(again.code == 0);
  fs::remove_all(dir);
}

TEST_CASE("apps: translate train then run translates stdin") {
  fs::path dir = fresh_dir("translate");
  {
    std::ofstream f(dir / "pairs.tsv");
    const char* words[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 200; ++i) {
      std::string src, tgt;
      int len = 1 + i % 3;
      for (int t = 0; t < len; ++t) src += std::string(t ? " " : "") + words[(i + t) % 4];
      for (int t = len - 1; t >= 0; --t)
        tgt += std::string(t != len - 1 ? " " : "") + words[(i + t) % 4];
      f << src << "\t" << tgt << "\n";
    }
  }
  std::string out = (dir / "run").string();
  Run train =
      run_mixlab("translate train --data " + (dir / "pairs.tsv").string() +
                 " --mixer lightconv --decoder-mixer attention --dim 16 --heads 2 --layers 1"
                 " --batch 16 --steps 40 --log-every 5 --lr 3e-3 --warmup 5 --dropout 0 --out " +
                 out);
  INFO(train.output);
  REQUIRE(train.code == 0);
  CHECK(train.output.find("test exact_match") != std::string::npos);
  auto [first, last] = loss_trend(fs::path(out) / "metrics.csv");
  CHECK(last < first);
  Run run = run_mixlab("translate run --checkpoint " + out + "/last.safetensors", "a b c\nd\n");
  INFO(run.output);
  CHECK(run.code == 0);
  int lines = 0;
  for (char c : run.output) lines += c == '\n';
  CHECK(lines == 2);
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
    return r.output;
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
  // Wait until training has started (its config is written first), then interrupt it.
  for (int i = 0; i < 200 && !fs::exists(fs::path(out) / "model.json"); ++i) ::usleep(50000);
  ::usleep(1500000);
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
      " --dim 16 --heads 2 --layers 1 --steps 2 --quiet --out /tmp/mixlab_debug_" +
      std::to_string(::getpid()));
  ::unsetenv("MIXLAB_DEBUG");
  fs::remove_all("/tmp/mixlab_debug_" + std::to_string(::getpid()));
  CHECK(traced.code == 0);
  CHECK(traced.output.find("[mixlab cpu] gemm") != std::string::npos);
  CHECK(traced.output.find("kernel time by kernel") != std::string::npos);
}
