// Runs the built `mixlab` executable for the inspect and study app tests: its exit code and its
// output (stdout and stderr together, captured through a file).
#pragma once
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/file_helpers.h"

namespace mixlab::testing {

struct CliResult {
  int code = -1;
  std::string output;
};

inline CliResult mixlab_cli(const std::string& args) {
  static int calls = 0;
  std::filesystem::path log =
      std::filesystem::temp_directory_path() /
      ("mixlab-cli-" + std::to_string(::getpid()) + "-" + std::to_string(calls++) + ".log");
  std::string cmd =
      std::string(MIXLAB_BINARY_DIR) + "/mixlab " + args + " > " + log.string() + " 2>&1";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = read_file(log.string());
  std::filesystem::remove(log);
  return r;
}

}  // namespace mixlab::testing
