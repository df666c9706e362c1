#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "test_data_util.h"
#include "train/data/idx.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::contains;
using mixlab::testing::error_of;
using mixlab::testing::TempDir;
using mixlab::testing::write_file;
using mixlab::testing::write_gz;

namespace {

void put_be32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}

// An IDX image file of `n` 28x28 images where pixel p of image i is (i * 7 + p) % 256.
std::string images_idx(uint32_t n) {
  std::string bytes;
  put_be32(bytes, 0x00000803);
  put_be32(bytes, n);
  put_be32(bytes, 28);
  put_be32(bytes, 28);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t p = 0; p < 28 * 28; ++p) bytes.push_back(static_cast<char>((i * 7 + p) % 256));
  }
  return bytes;
}

std::string labels_idx(const std::vector<uint8_t>& labels) {
  std::string bytes;
  put_be32(bytes, 0x00000801);
  put_be32(bytes, static_cast<uint32_t>(labels.size()));
  for (uint8_t label : labels) bytes.push_back(static_cast<char>(label));
  return bytes;
}

float normalized(int byte) { return (byte / 255.0f - kFashionMnistMean) / kFashionMnistStd; }

}  // namespace

TEST_CASE("data: idx reads hand-made gzip and plain files") {
  TempDir dir;
  std::string small;
  put_be32(small, 0x00000802);  // 2-D
  put_be32(small, 2);
  put_be32(small, 3);
  small += std::string("\x00\x01\x02\xfd\xfe\xff", 6);
  write_file(dir.file("small.idx"), small);
  write_gz(dir.file("small.idx.gz"), small);
  for (const std::string name : {"small.idx", "small.idx.gz"}) {
    const IdxArray array = read_idx(dir.file(name));
    CHECK(array.dims == std::vector<int64_t>{2, 3});
    CHECK(array.data == std::vector<uint8_t>{0, 1, 2, 253, 254, 255});
  }

  // A Fashion-MNIST directory with the train files gzipped and the test files plain.
  write_gz(dir.file("train-images-idx3-ubyte.gz"), images_idx(3));
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), labels_idx({9, 0, 4}));
  write_file(dir.file("t10k-images-idx3-ubyte"), images_idx(2));
  write_file(dir.file("t10k-labels-idx1-ubyte"), labels_idx({1, 2}));
  const InMemoryDataset train = load_fashion_mnist(dir.path(), "train");
  REQUIRE(train.size() == 3);
  CHECK(train.at(0).label == 9);
  CHECK(train.at(2).label == 4);
  REQUIRE(train.at(1).features.size() == 784);
  CHECK(train.at(1).features[0] == doctest::Approx(normalized(7)));
  CHECK(train.at(1).features[100] == doctest::Approx(normalized(107)));
  CHECK(train.at(2).features[783] == doctest::Approx(normalized((14 + 783) % 256)));
  CHECK(normalized(0) == doctest::Approx(-0.2860f / 0.3530f));
  const InMemoryDataset test = load_fashion_mnist(dir.path(), "test");
  REQUIRE(test.size() == 2);
  CHECK(test.at(1).label == 2);
  CHECK_THROWS_AS(load_fashion_mnist(dir.path(), "validation"), Error);
}

TEST_CASE("data: idx truncated or wrong files name the file") {
  TempDir dir;
  const std::string full = images_idx(2);
  write_file(dir.file("cut.idx"), full.substr(0, full.size() - 5));
  std::string message = error_of([&] { read_idx(dir.file("cut.idx")); });
  CHECK(contains(message, dir.file("cut.idx")));
  CHECK(contains(message, "truncated"));

  write_file(dir.file("header.idx"), full.substr(0, 10));
  CHECK(contains(error_of([&] { read_idx(dir.file("header.idx")); }), "truncated IDX header"));

  // A gzip stream cut in the middle.
  write_gz(dir.file("whole.gz"), full);
  std::string gz;
  {
    std::ifstream in(dir.file("whole.gz"), std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  write_file(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  message = error_of([&] { read_idx(dir.file("cut.gz")); });
  CHECK(contains(message, dir.file("cut.gz")));
  CHECK(contains(message, "truncated or corrupt"));

  std::string wrong;
  put_be32(wrong, 0x00000D03);  // float elements: not supported
  write_file(dir.file("float.idx"), wrong);
  CHECK(contains(error_of([&] { read_idx(dir.file("float.idx")); }), "magic"));

  write_file(dir.file("long.idx"), labels_idx({1, 2}) + "x");
  CHECK(contains(error_of([&] { read_idx(dir.file("long.idx")); }), "unexpected bytes"));

  // Images and labels that disagree in count.
  write_file(dir.file("train-images-idx3-ubyte"), images_idx(2));
  write_file(dir.file("train-labels-idx1-ubyte"), labels_idx({1, 2, 3}));
  CHECK(contains(error_of([&] { load_fashion_mnist(dir.path(), "train"); }), "labels"));
  write_file(dir.file("train-labels-idx1-ubyte"), labels_idx({1, 12}));
  CHECK(contains(error_of([&] { load_fashion_mnist(dir.path(), "train"); }), "not in 0..9"));
}

TEST_CASE("data: fashion-mnist missing dir or file names the Debian package and the path") {
  TempDir dir;
  const std::string missing = dir.file("nowhere");
  std::string message = error_of([&] { load_fashion_mnist(missing, "train"); });
  CHECK(contains(message, "dataset-fashion-mnist"));
  CHECK(contains(message, missing));

  write_file(dir.file("train-images-idx3-ubyte"), images_idx(1));
  message = error_of([&] { load_fashion_mnist(dir.path(), "train"); });
  CHECK(contains(message, "dataset-fashion-mnist"));
  CHECK(contains(message, dir.file("train-labels-idx1-ubyte")));
}
