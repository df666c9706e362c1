// A fresh directory under the system temp dir, unique per process and instance, removed with
// everything in it when the test is done. Tests write the small files they need here.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

namespace mixlab::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    root = std::filesystem::temp_directory_path() /
           ("mixlab-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(root, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (root / name).string(); }
  std::string path() const { return root.string(); }
  // Names in the directory, e.g. to catch leftover temporary files.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(root))
      out.push_back(entry.path().filename());
    return out;
  }

  std::filesystem::path root;
};

}  // namespace mixlab::testing
