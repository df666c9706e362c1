// safetensors save/load (io/safetensors.h) and the atomic file write under it
// (io/atomic_file.h).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/skip.h"
#include "tests/temp_dir.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::read_file;
using mixlab::testing::write_file_bytes;
namespace fs = std::filesystem;

namespace {

// A fresh directory for one test, removed with everything in it at the end.
using mixlab::testing::TempDir;

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A file made by hand: the 8-byte length, `header` as given, then `data_size` bytes of data.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_size) {
  std::vector<uint8_t> out;
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(length >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_size; ++i) out.push_back(static_cast<uint8_t>(i));
  return out;
}

// The Error message of loading `content` from a file, or "" when it loads.
std::string file_load_error(const TempDir& dir, const std::vector<uint8_t>& content) {
  const std::string path = dir.file("bad.safetensors");
  write_file_bytes(path, content);
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find(path) != std::string::npos);  // every refusal names the file
    return message;
  }
  return "";
}

std::vector<TensorRecord> sample_tensors() {
  return {
      {"w", "F32", {2, 3}, bytes_of(std::vector<float>{0, 1, 2, 3, 4, 5})},
      {"step", "I64", {}, bytes_of(std::vector<int64_t>{1234567890123})},
      {"mask", "U8", {3}, {1, 0, 1}},
      {"empty", "F64", {0, 4}, {}},
      {"half", "BF16", {2}, {0x80, 0x3F, 0x00, 0x40}},
  };
}

}  // namespace

TEST_CASE("safetensors: round trip keeps names dtypes shapes bytes and metadata") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<TensorRecord> tensors = sample_tensors();
  const std::map<std::string, std::string> metadata = {{"format", "mixlab"}, {"step", "7"}};
  save_safetensors(path, tensors, metadata);

  const SafetensorsFile file = load_safetensors(path);
  CHECK(file.metadata == metadata);
  REQUIRE(file.tensors.size() == tensors.size());
  // Loaded tensors come sorted by name.
  const std::vector<std::string> names = {"empty", "half", "mask", "step", "w"};
  for (size_t i = 0; i < names.size(); ++i) CHECK(file.tensors[i].name == names[i]);
  for (const TensorRecord& original : tensors) {
    const TensorRecord& loaded = file.at(original.name);
    CHECK(loaded.dtype == original.dtype);
    CHECK(loaded.shape == original.shape);
    CHECK(loaded.bytes == original.bytes);
  }
  CHECK_THROWS_WITH_AS(file.at("nope"), doctest::Contains("the file holds: empty, half"), Error);
  CHECK(dir.names() == std::vector<std::string>{"model.safetensors"});  // no temporary left
}

TEST_CASE("safetensors: byte-exact with the reference serializer") {
  // Expected bytes from the reference implementation's own tests (safetensors/src/tensor.rs:
  // test_serialization, test_empty, test_serialization_forced_alignement).
  const std::vector<uint8_t> f32 = bytes_of(std::vector<float>{0, 1, 2, 3, 4, 5});
  auto expect = [](const std::string& header, const std::vector<uint8_t>& data) {
    std::vector<uint8_t> out = raw_file(header, 0);
    out.insert(out.end(), data.begin(), data.end());
    return out;
  };
  CHECK(serialize_safetensors({{"attn.0", "F32", {1, 2, 3}, f32}}, {}) ==
        expect(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})", f32));
  CHECK(serialize_safetensors({{"attn0", "F32", {1, 1, 2, 3}, f32}}, {}) ==
        expect(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )", f32));
  CHECK(serialize_safetensors({}, {}) == expect("{}      ", {}));
  CHECK(serialize_safetensors({}, {{"framework", "pt"}}) ==
        expect(R"({"__metadata__":{"framework":"pt"}}     )", {}));
}

TEST_CASE("safetensors: larger dtypes first keeps every tensor aligned") {
  const std::vector<uint8_t> content =
      serialize_safetensors({{"a", "U8", {3}, {1, 2, 3}},
                             {"b", "F32", {1}, {0, 0, 0x80, 0x3F}},
                             {"c", "I64", {1}, std::vector<uint8_t>(8, 7)},
                             {"d", "F32", {1}, {0, 0, 0, 0x40}}},
                            {});
  const std::string header(content.begin() + 8, content.end() - 3 - 4 - 8 - 4);
  CHECK(header.size() % 8 == 0);
  CHECK(header.find(R"("c":{"dtype":"I64","shape":[1],"data_offsets":[0,8]})") !=
        std::string::npos);
  CHECK(header.find(R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]})") !=
        std::string::npos);
  CHECK(header.find(R"("d":{"dtype":"F32","shape":[1],"data_offsets":[12,16]})") !=
        std::string::npos);
  CHECK(header.find(R"("a":{"dtype":"U8","shape":[3],"data_offsets":[16,19]})") !=
        std::string::npos);
  // A header that the reference would write in another order (and any order) loads the same.
  const SafetensorsFile file = parse_safetensors(content, "memory");
  CHECK(file.at("a").bytes == std::vector<uint8_t>{1, 2, 3});
  CHECK(file.at("c").bytes == std::vector<uint8_t>(8, 7));
}

TEST_CASE("safetensors: load refuses every kind of corrupt file naming it") {
  TempDir dir;
  const auto refused = [&](const std::vector<uint8_t>& content, const std::string& phrase) {
    const std::string message = file_load_error(dir, content);
    INFO("expected '", phrase, "' in: ", message);
    CHECK(message.find(phrase) != std::string::npos);
  };
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(file_load_error(dir, raw_file(ok, 8)) == "");

  refused({1, 2, 3}, "shorter than the 8-byte header length");
  std::vector<uint8_t> long_header = raw_file(ok, 8);
  long_header[0] = 200;  // header length beyond the file
  refused(long_header, "is beyond the file size");
  std::vector<uint8_t> huge_header = raw_file(ok, 8);
  huge_header[7] = 1;  // 2^56 bytes
  refused(huge_header, "beyond the limit");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8),
          "invalid header: json:");
  refused(raw_file(R"([1, 2])", 8), "does not start with '{'");
  refused(raw_file(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", 8),
          "unknown dtype \"F31\"");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
          "F32 [3] needs 12 bytes but data_offsets [0, 8] span 8");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8),
          "beyond the data section of 8 bytes");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                   12),
          "overlap the previous tensor");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                   12),
          "leave a gap after byte 4");
  refused(raw_file(ok, 9), "cover 8 bytes of a data section of 9 bytes");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                   16),
          "duplicate key \"a\"");
  std::vector<uint8_t> truncated = raw_file(ok, 8);
  truncated.erase(truncated.end() - 3, truncated.end());
  refused(truncated, "(truncated file?)");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
          "shape must hold non-negative integers");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", 8),
          "data_offsets must hold non-negative integers");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
          "end before they begin");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8),
          "data_offsets must be [begin, end]");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", 0), "needs \"dtype\", \"shape\"");
  refused(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
          "unknown field \"x\"");
  refused(raw_file(R"({"__metadata__":{"k":1}})", 0), "entry \"k\" must be a string");
  refused(raw_file(R"({"a":[1]})", 0), "tensor \"a\" must be an object");
  refused(
      raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
      "overflows");
  refused(raw_file("{\"\xFF\":1}", 0), "invalid UTF-8");
  CHECK_THROWS_WITH_AS(load_safetensors(dir.file("missing.safetensors")),
                       doctest::Contains("cannot open the file"), Error);
}

TEST_CASE("safetensors: save refuses invalid records and keeps the old file") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, sample_tensors(), {});
  const std::string before = read_file(path);
  const auto refused = [&](const std::vector<TensorRecord>& tensors, const std::string& phrase) {
    try {
      save_safetensors(path, tensors, {});
      FAIL("saved ", phrase);
    } catch (const Error& e) {
      const std::string message = e.what();
      INFO(message);
      CHECK(message.find(phrase) != std::string::npos);
      CHECK(message.find(path) != std::string::npos);
    }
  };
  refused({{"a", "F32", {2}, {0, 0, 0}}}, "F32 [2] needs 8 bytes, got 3");
  refused({{"a", "Q4", {1}, {0}}}, "unknown or unsupported dtype \"Q4\"");
  refused({{"a", "U8", {-1}, {}}}, "invalid shape [-1]");
  refused({{"a", "U8", {1}, {0}}, {"a", "U8", {1}, {0}}}, "duplicate name");
  refused({{"", "U8", {1}, {0}}}, "empty name");
  refused({{"__metadata__", "U8", {1}, {0}}}, "reserved");
  CHECK(read_file(path) == before);
  CHECK(dir.names() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("safetensors: atomic write leaves the old file intact when the writer throws midway") {
  TempDir dir;
  const std::string path = dir.file("checkpoint.bin");
  write_file_atomically(path, std::string_view("old content"));
  CHECK(read_file(path) == "old content");

  // The writer has already written (more than one buffer's worth) when it throws.
  CHECK_THROWS_WITH_AS(write_file_atomically(path,
                                             [](std::ostream& out) {
                                               out << std::string(200000, 'x');
                                               out.flush();
                                               throw std::runtime_error("disk on fire");
                                             }),
                       doctest::Contains("the writer failed: disk on fire"), Error);
  CHECK(read_file(path) == "old content");
  CHECK(dir.names() == std::vector<std::string>{"checkpoint.bin"});

  // A target that cannot be written: the directory does not exist.
  CHECK_THROWS_WITH_AS(write_file_atomically(dir.file("no/such/dir/f"), std::string_view("x")),
                       doctest::Contains("cannot create"), Error);
  // A target that is a directory: the rename fails, and the temporary file goes away.
  fs::create_directory(dir.root / "sub");
  CHECK_THROWS_WITH_AS(write_file_atomically(dir.file("sub"), std::string_view("x")),
                       doctest::Contains("cannot rename"), Error);
  CHECK(dir.names().size() == 2);

  // Success replaces the content, large or empty.
  const std::vector<uint8_t> big(300000, 9);
  write_file_atomically(path, std::span<const uint8_t>(big));
  CHECK(read_file(path) == std::string(big.begin(), big.end()));
  write_file_atomically(path, std::string_view(""));
  CHECK(read_file(path).empty());
}

TEST_CASE("safetensors: cross-check with python's safetensors (optional)") {
  if (std::system("python3 -c 'import safetensors, numpy' >/dev/null 2>&1") != 0) {
    MIXLAB_SKIP_TEST("python3 with safetensors and numpy is not available");
  }
  TempDir dir;
  const std::string ours = dir.file("ours.safetensors");
  const std::string theirs = dir.file("theirs.safetensors");
  const std::string script = dir.file("check.py");
  // Without the BF16 tensor: numpy has no bfloat16, so safetensors.numpy cannot load it.
  std::vector<TensorRecord> tensors = sample_tensors();
  std::erase_if(tensors, [](const TensorRecord& t) { return t.dtype == "BF16"; });
  save_safetensors(ours, tensors, {{"format", "mixlab"}});
  {
    std::ofstream out(script);
    out << R"(import sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
assert sorted(t) == ["empty", "mask", "step", "w"], sorted(t)
w = np.arange(6, dtype=np.float32).reshape(2, 3)
assert t["w"].dtype == np.float32 and np.array_equal(t["w"], w)
assert t["step"].dtype == np.int64 and t["step"].shape == () and int(t["step"]) == 1234567890123
assert t["mask"].dtype == np.uint8 and list(t["mask"]) == [1, 0, 1]
assert t["empty"].dtype == np.float64 and t["empty"].shape == (0, 4)
with safe_open(sys.argv[1], "np") as f:
    assert f.metadata() == {"format": "mixlab"}, f.metadata()
x = np.array([[1.5, -2.0]], dtype=np.float64)
y = np.array([1, 2, 3], dtype=np.int32)
save_file({"x": x, "y": y}, sys.argv[2], metadata={"from": "python"})
)";
  }
  const std::string command = "python3 '" + script + "' '" + ours + "' '" + theirs + "'";
  REQUIRE(std::system(command.c_str()) == 0);
  const SafetensorsFile file = load_safetensors(theirs);
  CHECK(file.metadata == std::map<std::string, std::string>{{"from", "python"}});
  CHECK(file.at("x").dtype == "F64");
  CHECK(file.at("x").shape == std::vector<int64_t>{1, 2});
  CHECK(file.at("x").bytes == bytes_of(std::vector<double>{1.5, -2.0}));
  CHECK(file.at("y").dtype == "I32");
  CHECK(file.at("y").bytes == bytes_of(std::vector<int32_t>{1, 2, 3}));
}
