#include "lab/study.h"

#include <cmath>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "lab/errors.h"
#include "lab/inspect.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "io/atomic_file.h"
#include "train/run/checkpoint.h"
#include "train/run/checkpoint_info.h"
#include "train/data/listops.h"
#include "io/json.h"
#include "io/run_log.h"
#include "train/run/interrupt.h"
#include "lab/study_stats.h"
#include "core/strings.h"

namespace mixlab::lab {

namespace fs = std::filesystem;

namespace {

std::string cell_base(const StudyOptions& o, const std::string& task, const std::string& mixer,
                      int seed) {
  return o.out + "/cells/" + folder_name(task) + "/" + folder_name(mixer) + "/seed-" +
         std::to_string(seed);
}

// An open file descriptor, closed with its owner.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// An exclusive lock on `path` (created if missing). Without `wait`, an Fd of -1 when another
// process holds it; with `wait`, blocks until it is free.
Fd lock_file(const std::string& path, bool wait, bool close_on_exec) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | (close_on_exec ? O_CLOEXEC : 0), 0644));
  check(fd.get() >= 0, "study: cannot open ", path, " (", std::strerror(errno), ")");
  while (::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK && !wait) return Fd();
    check(false, "study: cannot lock ", path, " (", std::strerror(errno), ")");
  }
  return fd;
}

// Starts `mixlab args...` (this executable) with stdout and stderr in `log`; returns its pid.
// The child gets a process group of its own (terminal signals reach only the study, which
// passes them on), SIGTERM when the study dies, and keeps `lock` (the cell's lock) open for as
// long as it lives. Between fork and exec only async-signal-safe calls are made.
pid_t start_child(const std::vector<std::string>& args, const std::string& log, const Fd& lock) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(log_fd >= 0, "study: cannot write ", log, " (", std::strerror(errno), ")");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(143);  // the study died before the line above
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::fcntl(lock.get(), F_SETFD, 0);  // the lock lives as long as this process
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  check(pid > 0, "study: could not start a training process (", std::strerror(fork_errno), ")");
  ::setpgid(pid, pid);  // also from here, so that a signal sent at once finds the group
  return pid;
}

// A child that ended (pid 0 when none has yet); `code` is its exit status (128 + signal when a
// signal ended it).
pid_t poll_child(int& code) {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) < 0)
    check(errno == EINTR, "study: waitpid failed (", std::strerror(errno), ")");
  if (pid > 0)
    code = WIFEXITED(status) ? WEXITSTATUS(status)
                             : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return pid;
}

// "test accuracy   0.1580" and "throughput   592.4 examples/s, ..." from the summary a
// training command prints at its end.
bool find_value(const std::string& log, const std::string& label, double& value) {
  std::istringstream in(log);
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(label, 0) != 0) continue;
    std::istringstream rest(line.substr(label.size()));
    double v;
    if (rest >> v) value = v, found = true;
  }
  return found;
}

// When the printed summary lacks them: the test metric from metrics.csv's "test" rows and the
// throughput from its last value in a column named like "examples/s".
void read_metrics_fallback(const std::string& csv, const StudyTask& t, CellResult& r) {
  MetricsTable table;
  try {
    table = read_metrics_csv(csv);
  } catch (const std::exception&) {
    return;
  }
  bool metric = r.has_metric, speed = r.has_throughput;
  for (const auto& row : table.rows)
    for (const auto& [key, value] : row.values) {
      if (!r.has_metric && row.phase == "test" && key == t.metric) r.metric = value, metric = true;
      bool per_second =
          key.find("example") != std::string::npos && key.find("/s") != std::string::npos;
      if (!r.has_throughput && per_second) r.throughput = value, speed = true;
    }
  r.has_metric = metric;
  r.has_throughput = speed;
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Accuracy of a ListOps checkpoint on fresh expressions of each length bin (kLengthBinSize per
// bin, seeds apart from training's).
std::vector<double> length_accuracy(const std::string& checkpoint, const StudyTask& task) {
  CheckpointInfo info = read_checkpoint_info(checkpoint);
  Classifier model(info.config);
  load_weights(checkpoint, model);
  model.eval();
  NoGradGuard no_grad;
  std::vector<double> out;
  for (size_t b = 0; b < task.length_bins.size(); ++b) {
    ListOpsConfig c;
    c.max_depth = 6;
    c.max_args = 5;
    c.min_len = task.length_bins[b].first;
    c.max_len = task.length_bins[b].second;
    c.count = kLengthBinSize;
    c.seed = 1000003 + b;
    InMemoryDataset data = listops_dataset(c);
    int64_t right = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      const Example& e = data.at(i);
      Tensor ids = Tensor::from_data(e.src, {1, static_cast<int64_t>(e.src.size())});
      std::vector<double> logits = model.forward(ids).to_double_vector();
      int64_t k = std::max_element(logits.begin(), logits.end()) - logits.begin();
      right += k == e.label;
    }
    out.push_back(static_cast<double>(right) / static_cast<double>(data.size()));
  }
  return out;
}

// The test set's size from the training command's first line: "data: ... 1000 test" at its end
// (classify) or before "; vocab ..." (translate).
int64_t test_set_size(const std::string& log) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data:", 0) != 0) continue;
    int64_t size = 0;
    for (size_t at = line.find(" test"); at != std::string::npos; at = line.find(" test", at + 1)) {
      const size_t after = at + 5;
      if (after != line.size() && line[after] != ';' && line[after] != ',') continue;
      size_t start = at;
      while (start > 0 && std::isdigit(static_cast<unsigned char>(line[start - 1]))) --start;
      if (start < at) size = std::stoll(line.substr(start, at - start));
    }
    return size;
  }
  return 0;
}

// The validation metric's gain over the last 20% of the cell's training (NaN: not known).
double validation_late_improvement(const std::string& csv, const StudyTask& t) {
  std::vector<std::pair<int64_t, double>> evaluations;
  try {
    for (const auto& row : read_metrics_csv(csv).rows) {
      const auto it = row.values.find(t.metric);
      if (row.phase == "valid" && it != row.values.end() && std::isfinite(it->second))
        evaluations.push_back({row.step, it->second});
    }
  } catch (const std::exception&) {
    return NAN;
  }
  return late_improvement(evaluations, t.higher_is_better);
}

Json cell_json(const CellResult& r) {
  Json j = Json::object();
  j.set("task", r.task);
  j.set("mixer", r.mixer);
  j.set("seed", r.seed);
  j.set("settings", r.settings);
  j.set("wall_seconds", r.wall_seconds);
  j.set("parameters", r.parameters);
  if (r.has_metric) j.set("metric", r.metric);
  if (r.has_throughput) j.set("examples_per_second", r.throughput);
  Json lengths = Json::array();
  for (double a : r.length_accuracy) lengths.push_back(a);
  j.set("length_accuracy", lengths);
  if (r.test_size > 0) j.set("test_size", r.test_size);
  if (std::isfinite(r.late_improvement)) j.set("late_improvement", r.late_improvement);
  return j;
}

CellResult cell_from_json(const Json& j) {
  CellResult r;
  r.task = j.at("task").as_string();
  r.mixer = j.at("mixer").as_string();
  r.seed = static_cast<int>(j.at("seed").as_int64());
  if (const Json* settings = j.find("settings")) r.settings = settings->as_string();
  r.wall_seconds = j.at("wall_seconds").as_double();
  r.parameters = j.at("parameters").as_int64();
  if (const Json* m = j.find("metric")) r.metric = m->as_double(), r.has_metric = true;
  if (const Json* t = j.find("examples_per_second"))
    r.throughput = t->as_double(), r.has_throughput = true;
  for (const Json& a : j.at("length_accuracy").as_array())
    r.length_accuracy.push_back(a.as_double());
  if (const Json* n = j.find("test_size")) r.test_size = n->as_int64();
  const Json* late = j.find("late_improvement");
  r.late_improvement = late ? late->as_double() : NAN;
  r.done = true;
  return r;
}

// The training command of a cell.
std::vector<std::string> cell_command(const StudyOptions& o, const StudyTask& t,
                                      const std::string& mixer, int seed, const std::string& dir) {
  std::vector<std::string> a{"mixlab", t.command, "train"};
  a.insert(a.end(), t.args.begin(), t.args.end());
  a.insert(a.end(), {"--mixer", mixer, "--seed", std::to_string(seed), "--threads",
                     std::to_string(o.threads), "--out", dir, "--quiet"});
  if (t.command == "translate") {
    // Mixers that cannot be causal are studied as encoders with an attention decoder.
    bool causal = MixerRegistry::instance().find(mixer).capabilities.causal;
    a.insert(a.end(), {"--decoder-mixer", causal ? mixer : "attention"});
  }
  if (o.steps > 0) a.insert(a.end(), {"--steps", std::to_string(o.steps)});
  return a;
}

}  // namespace

std::string cell_settings(const StudyOptions& o, const StudyTask& t, const std::string& mixer,
                          int seed) {
  const std::vector<std::string> cmd = cell_command(o, t, mixer, seed, "");
  std::string out;
  for (size_t i = 1; i < cmd.size(); ++i) {
    if (cmd[i] == "--out") {
      ++i;
      continue;
    }
    out += (out.empty() ? "" : " ") + cmd[i];
  }
  return out;
}

namespace {

// A cell with its measurements when its marker exists (done), else only its names and folder.
// A marker of other settings (another budget, --steps or --threads, or an older mixlab) is
// refused: its numbers would stand in the report for a run these settings never made.
CellResult cell_from_marker(const StudyOptions& o, const StudyTask& t, const std::string& mixer,
                            int seed) {
  std::string base = cell_base(o, t.name, mixer, seed);
  const std::string settings = cell_settings(o, t, mixer, seed);
  CellResult r;
  if (fs::exists(base + ".done.json")) {
    r = cell_from_json(Json::parse(read_file_text(base + ".done.json")));
    if (r.settings != settings)
      throw UsageError("study: the finished cell " + base + " was trained as `" +
                       (r.settings.empty() ? std::string("(settings not recorded)") : r.settings) +
                       "`, not as this study's `" + settings +
                       "`; give this study another --out, or the same settings as that one");
    // Judged from its own curve where it is kept, so every cell meets this mixlab's rule.
    if (fs::exists(base + "/metrics.csv"))
      r.late_improvement = validation_late_improvement(base + "/metrics.csv", t);
  }
  r.task = t.name;
  r.mixer = mixer;
  r.seed = seed;
  r.dir = base;
  r.settings = settings;
  return r;
}

// A cell that is running: its process, its lock and when it started.
struct Running {
  size_t cell;
  Fd lock;
  std::chrono::steady_clock::time_point start;
};

// Starts an unfinished cell's training from scratch. A training process of an earlier study may
// still hold the cell (it was told to stop and is saving): its lock is waited for first.
pid_t start_cell(const StudyOptions& o, const StudyTask& t, const CellResult& cell, Fd& lock) {
  fs::create_directories(fs::path(cell.dir).parent_path());
  const std::string lock_path = cell.dir + ".lock";
  lock = lock_file(lock_path, false, true);
  if (lock.get() < 0) {
    std::cout << "study: waiting for an earlier training process of " << cell.dir << " to end"
              << std::endl;
    lock = lock_file(lock_path, true, true);
  }
  fs::remove_all(cell.dir);  // an unfinished run: start it again
  std::vector<std::string> cmd = cell_command(o, t, cell.mixer, cell.seed, cell.dir);
  std::string shown;
  for (size_t i = 1; i < cmd.size(); ++i) shown += (i > 1 ? " " : "") + cmd[i];
  std::cout << "study: " << t.name << " / " << cell.mixer << " / seed " << cell.seed << ": mixlab "
            << shown << std::endl;
  return start_child(cmd, cell.dir + ".log", lock);
}

// Measures a cell whose training exited with `code` and marks it finished.
void finish_cell(const StudyTask& t, CellResult& r, int code, double seconds) {
  std::string log = r.dir + ".log";
  if (code != 0) {
    r.failed = true;
    r.exit_code = code;
    std::cout << "study: " << t.name << " / " << r.mixer << " / seed " << r.seed << " failed (exit "
              << code << "); see " << log << " (retried on the next run)\n";
    return;
  }
  std::string text = read_file_text(log);
  r.wall_seconds = seconds;
  r.has_metric = find_value(text, "test " + t.metric, r.metric);
  r.has_throughput = find_value(text, "throughput", r.throughput);
  if (!r.has_metric || !r.has_throughput) read_metrics_fallback(r.dir + "/metrics.csv", t, r);
  r.test_size = test_set_size(text);
  r.late_improvement = validation_late_improvement(r.dir + "/metrics.csv", t);
  std::string best = r.dir + "/best.safetensors";
  CheckpointInfo info = read_checkpoint_info(best);
  if (info.config.task == ModelTask::Classify)
    r.parameters = Classifier(info.config).parameter_count();
  else
    r.parameters = Translator(info.config).parameter_count();
  if (!t.length_bins.empty()) r.length_accuracy = length_accuracy(best, t);
  write_file_atomically(r.dir + ".done.json", std::string_view(cell_json(r).dump() + "\n"));
  r.done = true;
  std::cout << "study: " << t.name << " / " << r.mixer << " / seed " << r.seed << " done in "
            << static_cast<int64_t>(seconds) << " s, test " << t.metric << " "
            << (r.has_metric ? std::to_string(r.metric) : "not found") << std::endl;
}

// Every cell of the grid: finished ones from their markers, the others trained, `jobs` at a
// time. A SIGINT or SIGTERM to the study is passed on once to every running cell; the study
// waits for them (each saves its checkpoint) and throws Interrupted. A cell that was stopped
// by a signal of its own stops the study the same way.
std::vector<CellResult> run_grid(const StudyOptions& o, const std::vector<StudyTask>& tasks) {
  std::vector<CellResult> cells;
  std::vector<const StudyTask*> task_of;
  for (const auto& t : tasks)
    for (const auto& m : o.mixers)
      for (int s = 0; s < o.seeds; ++s) {
        cells.push_back(cell_from_marker(o, t, m, s));
        task_of.push_back(&t);
      }
  install_interrupt_handler();
  std::map<pid_t, Running> running;
  size_t next = 0;
  bool stopping = false, passed_on = false;
  try {
    while (true) {
      stopping = stopping || interrupted();
      while (!stopping && running.size() < static_cast<size_t>(o.jobs) && next < cells.size()) {
        const size_t i = next++;
        if (cells[i].done) continue;
        Fd lock;
        const pid_t pid = start_cell(o, *task_of[i], cells[i], lock);
        running.emplace(pid, Running{i, std::move(lock), std::chrono::steady_clock::now()});
      }
      if (running.empty()) break;
      if (interrupted() && !passed_on) {
        std::cout << "study: stopping " << running.size()
                  << " running cell(s); each saves its last checkpoint" << std::endl;
        for (const auto& [pid, r] : running) ::kill(pid, interrupt_signal());
        passed_on = true;
      }
      int code = 0;
      const pid_t pid = poll_child(code);
      if (pid == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      auto it = running.find(pid);
      if (it == running.end()) continue;
      const size_t i = it->second.cell;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.start)
              .count();
      running.erase(it);
      if (stopping || code == 130 || code == 128 + SIGINT || code == 128 + SIGTERM) {
        stopping = true;
        continue;
      }
      finish_cell(*task_of[i], cells[i], code, seconds);
    }
  } catch (...) {
    // Leave no cell behind: stop the running ones and wait for them.
    for (const auto& [pid, r] : running) ::kill(pid, SIGTERM);
    for (const auto& [pid, r] : running) ::waitpid(pid, nullptr, 0);
    uninstall_interrupt_handler();
    throw;
  }
  uninstall_interrupt_handler();
  if (stopping) throw Interrupted();
  return cells;
}

// The gallery: the same input through seed 0 of every mixer of a task.
void write_gallery(const StudyOptions& o, const StudyTask& t,
                   const std::vector<CellResult>& cells) {
  if (t.inspect_input.empty() && t.inspect_image < 0) return;
  for (const auto& c : cells) {
    if (c.task != t.name || c.seed != 0 || !c.done) continue;
    InspectOptions io;
    io.checkpoint = c.dir + "/best.safetensors";
    io.input = t.inspect_input;
    io.image = t.inspect_image;
    io.out = o.out + "/gallery/" + folder_name(t.name) + "/" + folder_name(c.mixer);
    try {
      run_inspect(io);
    } catch (const std::exception& e) {
      std::cout << "study: no gallery picture for " << t.name << " / " << c.mixer << ": "
                << e.what() << "\n";
    }
  }
}

}  // namespace

std::string folder_name(const std::string& name) {
  std::string slug;
  for (char c : name) slug += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  if (slug == name && !name.empty()) return name;
  uint32_t hash = 2166136261u;  // FNV-1a, 32 bits
  for (unsigned char c : name) hash = (hash ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", hash);
  return slug + "." + hex;
}

void run_study(const StudyOptions& options) {
  StudyOptions o = options;
  if (o.seeds == 0) o.seeds = o.budget == "tiny" ? 1 : 3;
  if (o.tasks.empty()) throw UsageError("--tasks is empty");
  if (o.mixers.empty()) throw UsageError("--mixers is empty");
  for (const auto& m : o.mixers) {
    try {
      MixerRegistry::instance().find(m);
    } catch (const Error& e) {
      throw UsageError(std::string("--mixers: ") + e.what());
    }
  }
  for (const auto& [flag, list] :
       {std::pair{"--tasks", &o.tasks}, std::pair{"--mixers", &o.mixers}})
    for (size_t i = 0; i < list->size(); ++i)
      if (std::find(list->begin(), list->begin() + i, (*list)[i]) != list->begin() + i)
        throw UsageError(std::string(flag) + " names '" + (*list)[i] +
                         "' twice; each one is trained once");
  std::vector<StudyTask> specs;
  for (const auto& t : o.tasks) specs.push_back(study_task(t, o.budget));
  fs::create_directories(o.out);
  const Fd study_lock = lock_file(o.out + "/.study.lock", false, true);
  if (study_lock.get() < 0)
    throw UsageError("another `mixlab study` is running in " + o.out + "; wait for it to end");
  std::vector<CellResult> cells = run_grid(o, specs);
  for (const auto& t : specs) write_gallery(o, t, cells);
  write_study_report(o, specs, cells);
  std::cout << "study: report in " << o.out << "/report.md and " << o.out
            << "/report.html\nrerun the same command to finish or extend the study: finished "
               "cells are kept\n";
  std::vector<std::string> failed;
  for (const auto& c : cells)
    if (c.failed)
      failed.push_back(c.task + " / " + c.mixer + " / seed " + std::to_string(c.seed) + " (exit " +
                       std::to_string(c.exit_code) + ", log " + c.dir + ".log)");
  if (!failed.empty())
    throw Error("study: " + std::to_string(failed.size()) + " of " + std::to_string(cells.size()) +
                " cells failed: " + join(failed, "; "));
}

}  // namespace mixlab::lab
