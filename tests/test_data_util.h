// Helpers for the data tests: a private temporary directory per test and small file writers, so
// that every test builds its own inputs and never depends on installed data sets.
#pragma once
#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <unistd.h>
#include <zlib.h>

namespace mixlab::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("mixlab-data-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline void write_gz(const std::string& path, const std::string& content) {
  gzFile file = gzopen(path.c_str(), "wb9");
  if (file == nullptr) throw std::runtime_error("cannot write " + path);
  const int written = gzwrite(file, content.data(), static_cast<unsigned>(content.size()));
  gzclose(file);
  if (written != static_cast<int>(content.size())) throw std::runtime_error("gzwrite " + path);
}

}  // namespace mixlab::testing
