// The atomic file writer under faults: a full disk (the MIXLAB_FAULT_ENOSPC hook of
// train/fault_hooks.h) keeps the previous file and leaves no temporary behind, and the
// temporary files of a killed writer are removed by the next write into the folder.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/settings.h"
#include "tests/temp_dir.h"
#include "io/atomic_file.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::read_file;
using mixlab::testing::TempDir;

namespace {

// A pid that belonged to a process which has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// Sets a fault hook's setting (core/settings.h) for one scope.
struct ScopedFaultSetting {
  ScopedFaultSetting(Setting which, const std::string& value) : which_(which) {
    override_setting(which, value.c_str());
  }
  ~ScopedFaultSetting() { override_setting(which_, nullptr); }
  Setting which_;
};

}  // namespace

TEST_CASE("atomic file: a full disk fails the write, keeps the old file and leaves no temporary") {
  TempDir dir;
  const std::string path = dir.file("last.safetensors");
  write_file_atomically(path, std::string_view("the previous checkpoint"));
  const std::string big(100000, 'x');
  {
    ScopedFaultSetting full(Setting::FaultEnospc, "last.safetensors");
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string_view(big)),
                         doctest::Contains("No space left on device"), Error);
    // The hook is per file name: another file in the folder is written normally.
    write_file_atomically(dir.file("other"), std::string_view(big));
  }
  CHECK(read_file(path) == "the previous checkpoint");
  CHECK(read_file(dir.file("other")) == big);
  for (const std::string& name : dir.names()) CHECK(!is_temporary_name(name));
  {
    ScopedFaultSetting full(Setting::FaultEnospc, "*");
    CHECK_THROWS_AS(write_file_atomically(dir.file("other"), std::string_view(big + "y")), Error);
  }
  CHECK(read_file(dir.file("other")) == big);
}

TEST_CASE("atomic file: temporaries of dead writers are removed, live and foreign files kept") {
  TempDir dir;
  const std::string dead = std::to_string(dead_pid());
  const std::string own = std::to_string(::getpid());
  const std::string parent = std::to_string(::getppid());  // alive: it runs this test
  // A user's files that merely look temporary (`*.tmp.<digits>` of a dead pid included) are
  // never mixlab's to remove: only `.mixlab-tmp.<pid>.<name>` is.
  const std::vector<std::string> kept = {".mixlab-tmp." + own + ".best.safetensors",
                                         ".mixlab-tmp." + parent + ".last.safetensors",
                                         "last.safetensors.tmp." + dead,
                                         "notes.tmp.999999",
                                         "thesis.tmp.docx",
                                         "notes.tmp.txt",
                                         ".mixlab-tmp.12a.x",
                                         ".mixlab-tmp." + dead,
                                         "plain"};
  const std::vector<std::string> removed = {".mixlab-tmp." + dead + ".last.safetensors",
                                            ".mixlab-tmp." + dead + ".config.ini"};
  for (const auto& name : kept) std::ofstream(dir.file(name)) << "keep";
  for (const auto& name : removed) std::ofstream(dir.file(name)) << "stale";
  std::filesystem::create_directory(dir.file(".mixlab-tmp." + dead + ".sub"));  // a folder: kept

  write_file_atomically(dir.file("model.json"), std::string_view("{}"));
  for (const auto& name : kept) CHECK_MESSAGE(std::filesystem::exists(dir.file(name)), name);
  for (const auto& name : removed) CHECK_MESSAGE(!std::filesystem::exists(dir.file(name)), name);
  CHECK(std::filesystem::is_directory(dir.file(".mixlab-tmp." + dead + ".sub")));
  CHECK(remove_stale_temporary_files(dir.path()) == 0);  // nothing left to remove
  CHECK(read_file(dir.file("model.json")) == "{}");
}
