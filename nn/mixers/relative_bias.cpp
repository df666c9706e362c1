#include "nn/mixers/relative_bias.h"

#include <algorithm>
#include <sstream>

#include "autograd/ops.h"

namespace mixlab {

int64_t RelativePositionBias::offsets(int64_t max_len, int64_t width) {
  int64_t rows = (max_len + width - 1) / width;
  return (2 * rows - 1) * (2 * width - 1);
}

RelativePositionBias::RelativePositionBias(int64_t heads, int64_t max_len, int64_t width)
    : heads_(heads), max_len_(max_len), width_(width), rows_((max_len + width - 1) / width) {
  check(width >= 1 && width <= max_len, "relative position bias: row width ", width,
        " must be in [1, ", max_len, "] (the longest sequence)");
  table = register_parameter("table", Tensor::zeros({offsets(max_len, width), heads}));
  index_ = register_buffer(
      "index", Tensor::from_data(offset_rows(0, max_len, max_len), {max_len, max_len}), false);
}

std::string RelativePositionBias::extra_repr() const {
  std::ostringstream out;
  out << "heads=" << heads_ << ", rows of " << width_ << ", " << table.size(0) << " offsets";
  return out.str();
}

std::vector<int32_t> RelativePositionBias::offset_rows(int64_t from, int64_t queries,
                                                       int64_t keys) const {
  std::vector<int32_t> rows;
  rows.reserve(static_cast<size_t>(queries * keys));
  const int64_t cols = 2 * width_ - 1;
  for (int64_t i = from; i < from + queries; ++i) {
    for (int64_t j = 0; j < keys; ++j) {
      int64_t dr = std::clamp(j / width_ - i / width_, -(rows_ - 1), rows_ - 1);
      int64_t dc = j % width_ - i % width_;
      rows.push_back(static_cast<int32_t>((dr + rows_ - 1) * cols + dc + width_ - 1));
    }
  }
  return rows;
}

Tensor RelativePositionBias::bias(int64_t from, int64_t queries, int64_t keys) const {
  Tensor index;
  if (from + queries <= max_len_ && keys <= max_len_) {
    index = contiguous(narrow(narrow(index_, 0, from, queries), 1, 0, keys));
  } else {  // beyond ℓ: the clipped offsets, formed here
    index = Tensor::from_data(offset_rows(from, queries, keys), {queries, keys}).to(table.device());
  }
  // embedding: [queries, keys, h]; the core wants the keys axis innermost, [1, h, queries, keys].
  return unsqueeze(contiguous(permute(embedding(table, index), {2, 0, 1})), 0);
}

}  // namespace mixlab
