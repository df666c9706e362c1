// IDX files (LeCun's MNIST format, also used by Fashion-MNIST) and the Fashion-MNIST loader.
//
// Layout: a 4-byte big-endian magic 0x0000TTNN (TT the element type, NN the number of
// dimensions), NN big-endian 32-bit dimension sizes, then the elements in row-major order. Only
// unsigned bytes (TT = 0x08) are supported: images are 0x00000803, labels 0x00000801. Files may be
// gzip-compressed or plain (file_io.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/dataset.h"

namespace mixlab {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Reads any unsigned-byte IDX file. Throws Error naming the file when the magic is wrong, the
// header is cut short, or the data are shorter (truncated) or longer than the header says.
IdxArray read_idx(const std::string& path);

// Fashion-MNIST's per-pixel statistics over the 60,000 training images, after scaling to [0, 1].
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// $MIXLAB_FASHION_MNIST_DIR when set, else /usr/share/datasets/fashion-mnist (where the Debian
// package dataset-fashion-mnist installs the files).
std::string default_fashion_mnist_dir();

// split "train" (60,000) or "test" (10,000) from `dir`, which holds the four standard files
// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte), each with or without .gz. Every example has features of 1*28*28 floats
// in (channel, row, column) order, standardized: (x / 255 - kFashionMnistMean) / kFashionMnistStd,
// so inputs have roughly zero mean and unit variance, and `label` 0..9. A missing directory or
// file throws Error naming the path and the Debian package dataset-fashion-mnist; images and
// labels that disagree in count, images that are not 28x28 or labels above 9 throw Error.
InMemoryDataset load_fashion_mnist(const std::string& dir = default_fashion_mnist_dir(),
                                   const std::string& split = "train");

}  // namespace mixlab
