// The data interface between readers/generators and the loader. Examples and batches live on
// the host as plain vectors; the trainer turns a Batch into tensors on the model's device.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mixlab {

// One example of any task. Classification uses `features` (images, already normalized, in
// (channel, row, column) order) or `src` (token ids) plus `label`; translation uses `src`/`tgt`.
struct Example {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
  std::vector<float> features;
  int32_t label = -1;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Example get(size_t index) const = 0;
};

// Examples held in memory: what every reader and generator in train/data returns.
class InMemoryDataset : public Dataset {
 public:
  InMemoryDataset() = default;
  explicit InMemoryDataset(std::vector<Example> examples) : examples_(std::move(examples)) {}
  size_t size() const override { return examples_.size(); }
  Example get(size_t index) const override { return examples_.at(index); }
  const Example& at(size_t index) const { return examples_.at(index); }
  std::vector<Example>& examples() { return examples_; }
  const std::vector<Example>& examples() const { return examples_; }

 private:
  std::vector<Example> examples_;
};

// A collated batch. Sequences are padded on the right with `pad_id` to the longest in the batch;
// `*_lengths` give the real lengths (the valid mask is position < length).
struct Batch {
  int64_t size = 0;
  std::vector<int32_t> src;  // [size, src_len]
  int64_t src_len = 0;
  std::vector<int32_t> src_lengths;
  std::vector<int32_t> tgt;  // [size, tgt_len]
  int64_t tgt_len = 0;
  std::vector<int32_t> tgt_lengths;
  std::vector<float> features;  // [size, feature_dims...]
  std::vector<int64_t> feature_shape;
  std::vector<int32_t> labels;  // [size]
  std::vector<size_t> indices;  // dataset indices of the examples, in batch order
  // Batch mixing (train/data/batch_mixing.h): each image's partner's label, and the weight λ of
  // its own label in the loss; empty and 1 when the batch is not mixed.
  std::vector<int32_t> mix_labels;
  double mix_weight = 1.0;
};

}  // namespace mixlab
