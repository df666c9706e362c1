// Helpers for the data tests: a private temporary directory per test and small file writers, so
// that every test builds its own inputs and never depends on installed data sets.
#pragma once
#include "core/error.h"
#include "tests/temp_dir.h"
#include "train/data/dataset.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

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

// `count` side x side images whose pixel p of example e is e * 1000 + p (every image distinct,
// every pixel known), labelled e % 3.
inline InMemoryDataset numbered_image_dataset(size_t count, int64_t side) {
  std::vector<Example> examples(count);
  for (size_t e = 0; e < count; ++e) {
    for (int64_t p = 0; p < side * side; ++p)
      examples[e].features.push_back(static_cast<float>(e * 1000 + p));
    examples[e].label = static_cast<int32_t>(e % 3);
  }
  return InMemoryDataset(std::move(examples));
}

// A folder of the four Fashion-MNIST files (train and t10k) with `n` 28x28 images, a different
// image per index, image i labelled i % 10.
inline void write_idx_image_folder(const std::filesystem::path& dir, uint32_t n) {
  auto put_be32 = [](std::string& s, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
  };
  std::filesystem::create_directories(dir);
  for (const char* split : {"train", "t10k"}) {
    std::string images, labels;
    for (uint32_t v : {0x803u, n, 28u, 28u}) put_be32(images, v);
    for (uint32_t v : {0x801u, n}) put_be32(labels, v);
    for (uint32_t i = 0; i < n; ++i) {
      for (int p = 0; p < 784; ++p) images.push_back(static_cast<char>((p * 7 + i * 13) % 256));
      labels.push_back(static_cast<char>(i % 10));
    }
    std::ofstream(dir / (std::string(split) + "-images-idx3-ubyte"), std::ios::binary) << images;
    std::ofstream(dir / (std::string(split) + "-labels-idx1-ubyte"), std::ios::binary) << labels;
  }
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
