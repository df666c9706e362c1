#include "train/data/idx.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "train/data/file_io.h"
#include "core/settings.h"

namespace mixlab {

namespace {

uint32_t read_be32(const std::string& bytes, size_t offset) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[offset + i]);
  }
  return value;
}

std::string fashion_file(const std::string& dir, const std::string& name) {
  const std::string path = find_plain_or_gz(dir + "/" + name);
  check(!path.empty(), "Fashion-MNIST: ", dir, "/", name, "(.gz) not found; install the Debian ",
        "package dataset-fashion-mnist (it provides /usr/share/datasets/fashion-mnist) or pass ",
        "the directory holding the four IDX files");
  return path;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  const std::string bytes = read_file_maybe_gz(path);
  check(bytes.size() >= 4, path, ": truncated IDX file (", bytes.size(),
        " bytes, shorter than the 4-byte magic)");
  const uint32_t magic = read_be32(bytes, 0);
  const uint32_t type = (magic >> 8) & 0xFF;
  const uint32_t ndim = magic & 0xFF;
  check((magic >> 16) == 0 && type == 0x08 && ndim >= 1, path, ": not an unsigned-byte IDX file",
        " (magic 0x", std::hex, magic, std::dec, "; expected 0x00000801 labels or 0x00000803 ",
        "images)");
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  check(bytes.size() >= header, path, ": truncated IDX header (", bytes.size(), " bytes, need ",
        header, " for ", ndim, " dimensions)");
  IdxArray array;
  size_t count = 1;
  for (uint32_t d = 0; d < ndim; ++d) {
    const uint32_t size = read_be32(bytes, 4 + 4 * static_cast<size_t>(d));
    array.dims.push_back(size);
    check(size == 0 || count <= SIZE_MAX / size, path, ": implausible IDX dimensions");
    count *= size;
  }
  const size_t available = bytes.size() - header;
  check(available >= count, path, ": truncated IDX file: the header promises ", count,
        " bytes of data, the file holds ", available);
  check(available == count, path, ": ", available - count,
        " unexpected bytes after the IDX data (header promises ", count, ")");
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

std::string default_fashion_mnist_dir() {
  if (const char* dir = setting(Setting::FashionMnistDir)) return dir;
  return "/usr/share/datasets/fashion-mnist";
}

InMemoryDataset load_fashion_mnist(const std::string& dir, const std::string& split) {
  check(split == "train" || split == "test", "Fashion-MNIST: unknown split '", split,
        "'; valid splits: train, test");
  std::error_code ec;
  check(std::filesystem::is_directory(dir, ec), "Fashion-MNIST: directory ", dir,
        " not found; install the Debian package dataset-fashion-mnist (it provides ",
        "/usr/share/datasets/fashion-mnist) or pass the directory holding the four IDX files");
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string images_path = fashion_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = fashion_file(dir, prefix + "-labels-idx1-ubyte");
  const IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  check(images.dims.size() == 3 && images.dims[1] == 28 && images.dims[2] == 28, images_path,
        ": expected images of shape [N, 28, 28]");
  check(labels.dims.size() == 1, labels_path, ": expected a 1-dimensional label file");
  check(images.dims[0] == labels.dims[0], images_path, " holds ", images.dims[0], " images but ",
        labels_path, " holds ", labels.dims[0], " labels");

  const size_t n = static_cast<size_t>(images.dims[0]);
  constexpr size_t kPixels = 28 * 28;
  // One lookup table for the 256 byte values instead of a division per pixel.
  float table[256];
  for (int v = 0; v < 256; ++v) {
    table[v] = (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  std::vector<Example> examples(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t label = labels.data[i];
    check(label <= 9, labels_path, ": label ", int{label}, " of example ", i, " is not in 0..9");
    examples[i].label = label;
    examples[i].features.resize(kPixels);
    const uint8_t* pixels = images.data.data() + i * kPixels;
    for (size_t p = 0; p < kPixels; ++p) examples[i].features[p] = table[pixels[p]];
  }
  return InMemoryDataset(std::move(examples));
}

}  // namespace mixlab
