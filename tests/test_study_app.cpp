// `mixlab study` through the executable: a tiny ListOps study (attention and fnet, 20 steps)
// writes the report with both rows, and a study killed after its first cell resumes without
// retraining it (its files keep their bytes and times) while the unfinished cell is trained.
// Also: usage errors, folder names, failed cells, signals reaching the cells, and the verdicts
// of the report on hand-made cells.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <algorithm>
#include <fcntl.h>
#include <iterator>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cli_runner.h"
#include "tests/svg_figure.h"
#include "tests/temp_dir.h"
#include "io/safetensors.h"
#include "lab/study.h"

using namespace mixlab::testing;
namespace fs = std::filesystem;

namespace {

const std::string kStudy =
    "study --budget tiny --tasks listops --mixers attention,fnet --steps 20 --threads 1 --out ";

// Every file of a folder (recursively) with its modification time and bytes.
std::map<std::string, std::pair<fs::file_time_type, std::string>> folder_state(
    const fs::path& dir) {
  std::map<std::string, std::pair<fs::file_time_type, std::string>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file())
      out[e.path().string()] = {e.last_write_time(), read_file(e.path().string())};
  return out;
}

}  // namespace

TEST_CASE("study app: tiny ListOps study, killed after one cell, resumes without retraining it") {
  TempDir dir;
  fs::path out = dir.root / "study";
  fs::path cells = out / "cells" / "listops";
  fs::path attention_done = cells / "attention" / "seed-0.done.json";
  fs::path fnet_done = cells / "fnet" / "seed-0.done.json";

  // Start the study in its own process group and kill the whole group (the study and its
  // training child) as soon as the first cell is marked finished.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    std::string cmd = std::string(MIXLAB_BINARY_DIR) + "/mixlab " + kStudy + out.string() + " > " +
                      dir.file("first.log") + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(attention_done) && std::chrono::steady_clock::now() < deadline) {
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) break;  // it ended on its own
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  // The study's lock is free once every process that shares it is gone, and a training child
  // that was forked but had not yet exec'd shares it: it dies with the group a moment later,
  // which the rerun must not race (it would rightly say another study is running).
  const std::string study_lock = (out / ".study.lock").string();
  bool unlocked = false;
  while (!unlocked && std::chrono::steady_clock::now() < deadline) {
    const int fd = ::open(study_lock.c_str(), O_RDONLY | O_CLOEXEC);
    unlocked = fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (fd >= 0) ::close(fd);
    if (!unlocked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  INFO(read_file(dir.file("first.log")));
  REQUIRE(unlocked);
  REQUIRE(fs::exists(attention_done));
  REQUIRE_FALSE(fs::exists(fnet_done));  // killed before the second cell finished
  auto before = folder_state(cells / "attention");

  CliResult second = mixlab_cli(kStudy + out.string());
  INFO(second.output);
  REQUIRE(second.code == 0);
  // The finished cell was not trained again: same files, same bytes, same times.
  CHECK(second.output.find("listops / attention") == std::string::npos);
  CHECK(second.output.find("listops / fnet") != std::string::npos);
  CHECK(folder_state(cells / "attention") == before);
  // The unfinished cell was: its marker and a loadable checkpoint exist now.
  CHECK(fs::exists(fnet_done));
  CHECK(read_file(fnet_done.string()).find("\"test_size\":1000") != std::string::npos);
  CHECK_NOTHROW(
      mixlab::load_safetensors((cells / "fnet" / "seed-0" / "best.safetensors").string()));

  std::string report = read_file((out / "report.md").string());
  CHECK(report.find("| attention | ") != std::string::npos);
  CHECK(report.find("| fnet | ") != std::string::npos);
  CHECK(report.find("(1 seed)") != std::string::npos);  // test metrics were read back
  CHECK(report.find("n/a (") == std::string::npos);
  CHECK(report.find("Length generalisation") != std::string::npos);
  CHECK(report.find("The papers' claims") != std::string::npos);
  CHECK(report.find("smoke test: no verdicts") != std::string::npos);  // tiny: no claims judged
  CHECK(report.find("± 0.0") != std::string::npos);  // length bins with their binomial interval
  std::string html = read_file((out / "report.html").string());
  CHECK(html.find("<td>fnet</td>") != std::string::npos);
  for (const char* f : {"curves-listops.svg", "scatter-listops.svg", "length-listops.svg",
                        "gallery/listops/attention/index.html", "gallery/listops/fnet/index.html"})
    CHECK(fs::exists(out / f));
  // Every figure reads: labelled ticks on both axes, and no bitmap standing in for text.
  for (const char* f : {"curves-listops.svg", "scatter-listops.svg", "length-listops.svg"}) {
    const std::string svg = read_file((out / f).string());
    INFO(f);
    CHECK(svg_tick_values(svg, "x").size() >= 2);
    CHECK(svg_tick_values(svg, "y").size() >= 2);
    CHECK(svg.find("<image") == std::string::npos);
  }
  for (const char* cell : {"attention", "fnet"})  // each cell's own curves, as SVG
    CHECK(
        svg_tick_values(read_file((cells / cell / "seed-0" / "curves.svg").string()), "y").size() >=
        2);

  // A third run finds everything finished and trains nothing.
  auto all_before = folder_state(cells);
  CliResult third = mixlab_cli(kStudy + out.string());
  CHECK(third.code == 0);
  CHECK(third.output.find("study: listops /") == std::string::npos);
  CHECK(folder_state(cells) == all_before);

  // Other settings in the same folder: the finished cells do not stand in for them.
  std::string longer = kStudy;
  longer.replace(longer.find("--steps 20"), 10, "--steps 21");
  CliResult other = mixlab_cli(longer + out.string());
  INFO(other.output);
  CHECK(other.code == 2);
  CHECK(other.output.find("attention/seed-0 was trained as") != std::string::npos);
  CHECK(other.output.find("--steps 20`, not as this study's") != std::string::npos);
  CHECK(other.output.find("--steps 21`") != std::string::npos);
  CHECK(folder_state(cells) == all_before);
}

TEST_CASE("study app: usage errors exit 2 before anything is trained") {
  TempDir dir;
  for (const char* args : {"--tasks nosuchtask --mixers attention", "--tasks listops --mixers gmpl",
                           "--tasks listops --mixers attention --budget huge",
                           "--tasks classify:/no/such/file.tsv --mixers attention",
                           "--tasks listops,scan,listops --mixers attention",
                           "--tasks listops --mixers attention,fnet,attention"}) {
    CliResult r = mixlab_cli(std::string("study ") + args + " --out " + dir.file("s"));
    INFO(args << ": " << r.output);
    CHECK(r.code == 2);
    CHECK_FALSE(fs::exists(dir.file("s") + "/cells"));
    if (std::string(args).find("attention,fnet,attention") != std::string::npos)
      CHECK(r.output.find("--mixers names 'attention' twice") != std::string::npos);
    if (std::string(args).find("listops,scan,listops") != std::string::npos)
      CHECK(r.output.find("--tasks names 'listops' twice") != std::string::npos);
  }
}

TEST_CASE("study app: cell folders are unique by construction") {
  using mixlab::lab::folder_name;
  CHECK(folder_name("listops") == "listops");
  CHECK(folder_name("attention") == "attention");
  CHECK(folder_name("classify:a.tsv") != folder_name("classify:a_tsv"));
  CHECK(folder_name("classify:a.tsv").rfind("classify_a_tsv.", 0) == 0);
  CHECK(folder_name("classify:a.tsv").size() == std::string("classify_a_tsv.").size() + 8);
  CHECK(folder_name("synth-mix:R+V") != folder_name("synth-mix:R_V"));
  CHECK(folder_name("a_b") == "a_b");
  CHECK(folder_name("a:b") != folder_name("a_b"));  // a hashed name holds a '.', a slug never
}

TEST_CASE("study app: tasks whose slugs agree train apart, a failed cell is named, exit 1") {
  TempDir dir;
  // Two data sets whose names have one slug, with different labels, and one malformed file.
  {
    std::ofstream a(dir.file("a.tsv")), b(dir.file("a_tsv")), bad(dir.file("bad.tsv"));
    for (int i = 0; i < 60; ++i) {
      a << (i % 2 ? "pos\tgood fine nice good\n" : "neg\tbad poor sad bad\n");
      b << (i % 3 ? "x\tp q p\n" : "y\tr s r\n");
    }
    bad << "no tab on this line\n";
  }
  const std::string a = "classify:" + dir.file("a.tsv"), b = "classify:" + dir.file("a_tsv"),
                    bad = "classify:" + dir.file("bad.tsv");
  fs::path out = dir.root / "s";
  CliResult r = mixlab_cli("study --tasks " + a + "," + b + "," + bad +
                           " --mixers attention --steps 5 --threads 1 --out " + out.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.output.find("1 of 3 cells failed: " + bad + " / attention / seed 0") !=
        std::string::npos);
  const fs::path cell_a = out / "cells" / mixlab::lab::folder_name(a) / "attention";
  const fs::path cell_b = out / "cells" / mixlab::lab::folder_name(b) / "attention";
  CHECK(cell_a != cell_b);
  REQUIRE(fs::exists(cell_a / "seed-0.done.json"));
  REQUIRE(fs::exists(cell_b / "seed-0.done.json"));
  // Each folder holds its own data set's run: the labels its checkpoint learned.
  CHECK(read_file((cell_a / "seed-0" / "config.ini").string()).find("a.tsv") != std::string::npos);
  CHECK(read_file((cell_b / "seed-0" / "config.ini").string()).find("a_tsv") != std::string::npos);
  CHECK(read_file((out / "report.md").string()).find("n/a (1 unfinished)") != std::string::npos);
}

namespace {

// The processes (other than this one) whose command line mentions `text`.
std::vector<std::string> processes_mentioning(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (name == std::to_string(::getpid())) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(text) != std::string::npos) out.push_back(name + ": " + cmdline);
  }
  return out;
}

// Starts a study on one long ListOps cell (its output in `log`); returns the study's pid once
// the cell has logged training rows.
pid_t start_long_study(const fs::path& out, const std::string& log) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const std::string binary = std::string(MIXLAB_BINARY_DIR) + "/mixlab";
    ::execl(binary.c_str(), "mixlab", "study", "--budget", "tiny", "--tasks", "listops", "--mixers",
            "attention", "--steps", "100000", "--threads", "1", "--out", out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The header is written when the run starts; a row below it was logged after a step.
  const fs::path csv = out / "cells" / "listops" / "attention" / "seed-0" / "metrics.csv";
  auto logged_rows = [&] {
    std::ifstream in(csv);
    std::string line;
    int lines = 0;
    while (lines < 2 && std::getline(in, line)) ++lines;
    return lines >= 2;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!logged_rows() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return pid;
}

// Waits up to a minute for `pid`; its exit status (128 + signal when a signal ended it).
int wait_for(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("study app: SIGINT or SIGTERM to the study stops its cell, which saves, none is left") {
  for (int sig : {SIGTERM, SIGINT}) {
    TempDir dir;
    const fs::path out = dir.root / "s";
    const pid_t study = start_long_study(out, dir.file("study.log"));
    ::kill(study, sig);  // the study alone, not its cell
    const int code = wait_for(study);
    INFO("signal " << sig << ": " << read_file(dir.file("study.log")));
    CHECK(code == 128 + sig);
    const fs::path cell = out / "cells" / "listops" / "attention";
    CHECK(fs::exists(cell / "seed-0" / "last.safetensors"));  // the cell saved before it ended
    CHECK_FALSE(fs::exists(cell / "seed-0.done.json"));       // and is not counted finished
    CHECK(processes_mentioning(out.string()).empty());
  }
}

TEST_CASE("study app: a study killed outright takes its cell with it") {
  TempDir dir;
  const fs::path out = dir.root / "s";
  const pid_t study = start_long_study(out, dir.file("study.log"));
  ::kill(study, SIGKILL);
  ::waitpid(study, nullptr, 0);
  // The cell is told (SIGTERM, from the kernel) and stops after saving; nothing keeps training.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!processes_mentioning(out.string()).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  INFO(read_file(dir.file("study.log")));
  CHECK(processes_mentioning(out.string()).empty());
  CHECK(fs::exists(out / "cells" / "listops" / "attention" / "seed-0" / "last.safetensors"));
}

namespace {

struct HandCell {
  const char* mixer;
  double metric[3];
  double speed[3];
  int64_t parameters;
};

// Finished cells made by hand (markers only, 3 seeds, with the settings a SCAN study of `budget`
// gives its cells): a study over them trains nothing.
void write_markers(const fs::path& out, const std::vector<HandCell>& cells, double late_gain,
                   const std::string& budget = "small") {
  mixlab::lab::StudyOptions options;
  options.budget = budget;
  const mixlab::lab::StudyTask scan = mixlab::lab::study_task("scan", budget);
  for (const HandCell& c : cells)
    for (int seed = 0; seed < 3; ++seed) {
      fs::path marker = out / "cells" / "scan" / mixlab::lab::folder_name(c.mixer) /
                        ("seed-" + std::to_string(seed) + ".done.json");
      fs::create_directories(marker.parent_path());
      std::ofstream(marker) << "{\"task\":\"scan\",\"mixer\":\"" << c.mixer
                            << "\",\"seed\":" << seed << ",\"settings\":\""
                            << mixlab::lab::cell_settings(options, scan, c.mixer, seed)
                            << "\",\"wall_seconds\":10,\"parameters\":" << c.parameters
                            << ",\"metric\":" << c.metric[seed]
                            << ",\"examples_per_second\":" << c.speed[seed]
                            << ",\"length_accuracy\":[],\"test_size\":1000"
                            << ",\"late_improvement\":" << late_gain << "}\n";
    }
}

// The verdict a report gives the claim starting with `claim_start`.
std::string verdict_of(const std::string& report, const std::string& claim_start) {
  size_t at = report.find("- " + claim_start);
  if (at == std::string::npos) return "no such claim";
  std::string line = report.substr(at, report.find('\n', at) - at);
  size_t open = line.find(": **");
  if (open == std::string::npos) return "none";
  size_t close = line.find("**", open + 4);
  return line.substr(open + 4, close - open - 4);
}

}  // namespace

TEST_CASE("study app: the claims are judged by Welch's test on the seeds, with the noise rule") {
  TempDir dir;
  fs::path out = dir.root / "s";
  // Means and spreads chosen so that Welch's test gives clear answers (sd 0.01 per mixer):
  // R+V 0.94 vs attention 0.91: t = 3.67, df = 4, p = 0.021: supported.
  const std::vector<HandCell> cells = {{"attention", {0.90, 0.92, 0.91}, {500, 510, 490}, 300},
                                       {"synth-mix:R+V", {0.95, 0.93, 0.94}, {450, 455, 445}, 400},
                                       {"synth-random", {0.50, 0.50, 0.51}, {400, 405, 395}, 250},
                                       {"synth-fixed", {0.60, 0.61, 0.60}, {400, 405, 395}, 150},
                                       {"synth-frandom", {0.50, 0.50, 0.51}, {400, 405, 395}, 180},
                                       {"fnet", {0.30, 0.31, 0.30}, {1000, 1010, 990}, 100},
                                       {"resmlp", {0.20, 0.21, 0.20}, {900, 910, 890}, 120}};
  write_markers(out, cells, 0.001);
  std::string mixers;
  for (const HandCell& c : cells) mixers += std::string(mixers.empty() ? "" : ",") + c.mixer;
  const std::string command =
      "study --tasks scan --budget small --mixers " + mixers + " --out " + out.string();
  CliResult r = mixlab_cli(command);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("study: scan /") == std::string::npos);  // nothing trained: 3 seeds found
  std::string report = read_file((out / "report.md").string());
  INFO(report);
  CHECK(report.find("**What these numbers can and cannot show.**") < report.find("| mixer"));
  CHECK(verdict_of(report, "Synthesizer: the mixture R+V") == "supported");
  CHECK(verdict_of(report, "Synthesizer: Fix") == "contradicted");
  CHECK(verdict_of(report, "Input-independent mixers") == "supported");
  CHECK(verdict_of(report, "The factorised synthesizers") == "supported");
  CHECK(verdict_of(report, "FNet and the MLP mixers") == "supported");
  // Where the factorised form has as many parameters as the full one (a short task), the claim
  // is not tested there.
  std::vector<HandCell> same_size = cells;
  same_size[4].parameters = same_size[2].parameters;
  write_markers(out, same_size, 0.001);
  CHECK(mixlab_cli(command).code == 0);
  CHECK(verdict_of(read_file((out / "report.md").string()), "The factorised synthesizers") ==
        "inconclusive: no fewer parameters at this length");
  write_markers(out, cells, 0.001);
  // Means ± 95% t-intervals over 3 seeds: 4.303 · 0.01 / sqrt(3) = 0.025.
  CHECK(report.find("synth-mix:R+V 0.940 ± 0.025 (3 seeds) vs attention 0.910 ± 0.025 (3 seeds)") !=
        std::string::npos);
  // The binomial interval of a test accuracy from the test set's size (Wilson, n = 1000):
  // centre (0.91 + z²/2n) / (1 + z²/n) = 0.9084, half-width 0.0178.
  CHECK(report.find("[0.891, 0.926] n = 1000") != std::string::npos);
  CHECK(report.find("Chance rate: 0.000") != std::string::npos);
  CHECK(report.find("Published: 99.7% exact match (Lake & Baroni, 2018") != std::string::npos);
  CHECK(report.find("Cells ran one at a time") != std::string::npos);
  CHECK(report.find("| synth-mix:R+V | 0.940 ± 0.025 | 450 |") != std::string::npos);
  CHECK(report.find("add up to 3.5 minutes") != std::string::npos);  // 21 cells of 10 s
  // The machine is named, so a reader knows where the throughputs come from.
  CHECK(report.find("The report was written on ") != std::string::npos);
  CHECK(report.find(std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
                    " logical CPUs") != std::string::npos);

  // A cell whose validation metric still rose by 0.05 in its last 20%: not converged, and the
  // claims resting on it are inconclusive.
  write_markers(out, cells, 0.05);
  r = mixlab_cli(command);
  REQUIRE(r.code == 0);
  report = read_file((out / "report.md").string());
  CHECK(verdict_of(report, "Synthesizer: the mixture R+V") == "inconclusive: not converged");
  CHECK(report.find("not converged (+0.0500)") != std::string::npos);
  CHECK(verdict_of(report, "FNet and the MLP mixers") == "supported");  // speed needs no plateau

  // A kept cell is judged from its own curve, not from the number its marker stored: flat
  // validation curves make attention converged while its markers still say +0.05.
  for (int seed = 0; seed < 3; ++seed) {
    const fs::path cell = out / "cells" / "scan" / "attention" / ("seed-" + std::to_string(seed));
    fs::create_directories(cell);
    std::ofstream csv(cell / "metrics.csv");
    csv << "phase,step,epoch,loss,exact_match\n";
    for (int step = 100; step <= 1000; step += 100) csv << "valid," << step << ",1,0.1,0.91\n";
  }
  r = mixlab_cli(command);
  REQUIRE(r.code == 0);
  report = read_file((out / "report.md").string());
  const size_t row = report.find("\n| attention | 300 |");
  REQUIRE(row != std::string::npos);
  CHECK(report.substr(row, report.find('\n', row + 1) - row).find("yes (+0.0000)") !=
        std::string::npos);
  for (int seed = 0; seed < 3; ++seed)
    fs::remove_all(out / "cells" / "scan" / "attention" / ("seed-" + std::to_string(seed)));

  // The tiny budget is a smoke test: no verdicts at all.
  fs::remove_all(out);
  write_markers(out, cells, 0.001, "tiny");
  r = mixlab_cli("study --tasks scan --budget tiny --seeds 3 --mixers " + mixers + " --out " +
                 out.string());
  REQUIRE(r.code == 0);
  report = read_file((out / "report.md").string());
  CHECK(report.find("smoke test: no verdicts") != std::string::npos);
  CHECK(report.find("**supported**") == std::string::npos);
  CHECK(report.find("**contradicted**") == std::string::npos);
}

TEST_CASE("study app: the state-space claims, at least as good and selective over time-invariant") {
  TempDir dir;
  fs::path out = dir.root / "s";
  // mamba 0.92 vs attention 0.91 (sd 0.01 each): the 95% Welch interval of the difference is
  // 0.010 ± 2.776 · 0.01 · sqrt(2/3) = 0.010 ± 0.023, all above −0.02: at least as good.
  // mamba 0.92 vs s4d 0.603: far apart, better by Welch's test.
  const std::vector<HandCell> good = {{"attention", {0.90, 0.92, 0.91}, {500, 510, 490}, 300},
                                      {"mamba", {0.91, 0.93, 0.92}, {450, 455, 445}, 290},
                                      {"s4d", {0.60, 0.61, 0.60}, {400, 405, 395}, 280}};
  write_markers(out, good, 0.001);
  const std::string command =
      "study --tasks scan --budget small --mixers attention,mamba,s4d --out " + out.string();
  CliResult r = mixlab_cli(command);
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::string report = read_file((out / "report.md").string());
  INFO(report);
  CHECK(verdict_of(report, "Mamba: the selective scan is at least as good") == "supported");
  CHECK(verdict_of(report, "Selective state spaces (mamba) beat") == "supported");

  // mamba 0.85 vs attention 0.91: the interval 0.06 ± 0.023 lies below −0.02: contradicted.
  TempDir dir2;
  fs::path out2 = dir2.root / "s";
  const std::vector<HandCell> worse = {{"attention", {0.90, 0.92, 0.91}, {500, 510, 490}, 300},
                                       {"mamba", {0.84, 0.86, 0.85}, {450, 455, 445}, 290},
                                       {"s4d", {0.84, 0.86, 0.85}, {400, 405, 395}, 280}};
  write_markers(out2, worse, 0.001);
  r = mixlab_cli("study --tasks scan --budget small --mixers attention,mamba,s4d --out " +
                 out2.string());
  REQUIRE(r.code == 0);
  report = read_file((out2 / "report.md").string());
  CHECK(verdict_of(report, "Mamba: the selective scan is at least as good") == "contradicted");
  // Equal means: no test can tell them apart.
  CHECK(verdict_of(report, "Selective state spaces (mamba) beat").rfind("inconclusive", 0) == 0);
}
