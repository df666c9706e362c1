// Runs the `mixlab` executable from the tests that need a real process (fault and bad-input
// tests): with extra environment variables, its output captured in a file, and either waited for
// or left running so that the test can signal it. The executable lies beside mixlab_tests.
#pragma once
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mixlab::testing {

inline std::string mixlab_binary() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "mixlab").string();
}

// How a process ended: exited with `code`, or killed by `signal`.
struct Exit {
  int code = -1;
  int signal = 0;
  std::string output;  // stdout and stderr together
};

class AppProcess {
 public:
  // Starts `mixlab ARGS` with `env` added to the environment; stdin is /dev/null and the output
  // goes to `log_path`.
  AppProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
             std::string log_path)
      : log_(std::move(log_path)) {
    std::vector<std::string> argv_strings{mixlab_binary()};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    // Everything the child needs is prepared before fork(): between fork and exec a child of a
    // process with threads (the kernels' pool) may only call async-signal-safe functions.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      if (!env.count(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
    }
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0) ::_exit(126);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(out, 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
  }
  AppProcess(const AppProcess&) = delete;
  AppProcess& operator=(const AppProcess&) = delete;
  ~AppProcess() {
    if (!waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }

  pid_t pid() const { return pid_; }

  // True while the process has not exited (it is not reaped here).
  bool running() const {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == 0;
  }

  void signal(int sig) const { ::kill(pid_, sig); }

  Exit wait() {
    int status = 0;
    if (!waited_) ::waitpid(pid_, &status, 0);
    waited_ = true;
    Exit e;
    if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
    std::ifstream in(log_, std::ios::binary);
    e.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return e;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool waited_ = false;
};

// Runs `mixlab ARGS` to its end.
inline Exit run_app(const std::vector<std::string>& args, const std::string& log_path,
                    const std::map<std::string, std::string>& env = {}) {
  AppProcess p(args, env, log_path);
  return p.wait();
}

// Runs `mixlab ARGS` to its end through the shell, ARGS split as the shell splits them: in `cwd`
// (the current directory when empty), with `env` ("K=V ...") in front, stdin from `input`
// (/dev/null when empty), stdout and stderr together into `log_path`.
inline Exit run_app_shell(const std::string& args, const std::string& log_path,
                          const std::string& cwd = "", const std::string& env = "",
                          const std::string& input = "") {
  const std::string command = (cwd.empty() ? "" : "cd '" + cwd + "' && ") + env + " '" +
                              mixlab_binary() + "' " + args + " > '" + log_path + "' 2>&1 < '" +
                              (input.empty() ? "/dev/null" : input) + "'";
  const int status = std::system(command.c_str());
  Exit e;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  std::ifstream in(log_path, std::ios::binary);
  e.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return e;
}

// The call count of each kernel in a MIXLAB_DEBUG=1 run's output (its kernel table's rows:
// "name calls total mean share").
inline std::map<std::string, long long> kernel_call_counts(const std::string& output) {
  std::map<std::string, long long> calls;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string kernel;
    long long count = 0;
    if (fields >> kernel >> count) calls[kernel] = count;
  }
  return calls;
}

}  // namespace mixlab::testing
