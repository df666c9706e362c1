// Helpers for the data tests: a private temporary directory per test and small file writers, so
// that every test builds its own inputs and never depends on installed data sets.
#pragma once
#include "core/error.h"
#include "tests/temp_dir.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <unistd.h>
#include <zlib.h>

namespace mixlab::testing {

using TempDir = mixlab::testing::TempDir;  // tests/temp_dir.h

// The message of the mixlab::Error that `action` throws, or "" when it throws nothing.
inline std::string error_of(auto&& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

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
