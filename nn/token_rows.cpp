#include "nn/token_rows.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace mixlab {

TokenRows token_rows(const std::vector<int32_t>& lengths, int64_t n, Device device) {
  TokenRows rows;
  const int64_t all = static_cast<int64_t>(lengths.size()) * n;
  std::vector<std::vector<int64_t>> by_length(n + 1);  // the sequences of each length
  for (size_t b = 0; b < lengths.size(); ++b) {
    check(lengths[b] >= 0 && lengths[b] <= n, "token_rows: length ", lengths[b], " outside [0, ", n,
          "]");
    by_length[lengths[b]].push_back(static_cast<int64_t>(b));
  }
  std::vector<int32_t> index, place(all, -1);
  for (int64_t length = 1; length <= n; ++length) {
    if (by_length[length].empty()) continue;
    rows.groups.push_back({static_cast<int64_t>(by_length[length].size()), length});
    for (int64_t b : by_length[length])
      for (int64_t t = 0; t < length; ++t) {
        place[b * n + t] = static_cast<int32_t>(index.size());
        index.push_back(static_cast<int32_t>(b * n + t));
      }
  }
  if (index.empty() || static_cast<int64_t>(index.size()) == all) return TokenRows();
  rows.index = Tensor::from_data(index, {static_cast<int64_t>(index.size())}, device);
  rows.place = Tensor::from_data(place, {all}, device);
  rows.batch = static_cast<int64_t>(lengths.size());
  rows.length = n;
  return rows;
}

// token_rows built both index vectors, in range and each the other's inverse: no check kernels.
Tensor pack_rows(const Tensor& x, const TokenRows& rows) {
  check(x.dim() >= 2 && x.size(0) == rows.batch && x.size(1) == rows.length, "pack_rows: x ",
        shape_str(x.shape()), " is not a [", rows.batch, ", ", rows.length, ", ...] batch");
  Shape flat = x.shape();
  flat.erase(flat.begin());
  flat[0] = rows.batch * rows.length;
  return take_rows(reshape(x, flat), rows.index, rows.place, false);
}

Tensor unpack_rows(const Tensor& x_rows, const TokenRows& rows) {
  check(x_rows.dim() >= 1 && x_rows.size(0) == rows.count(), "unpack_rows: x ",
        shape_str(x_rows.shape()), " does not have the ", rows.count(), " rows of the batch");
  Shape shape = x_rows.shape();
  shape[0] = rows.length;
  shape.insert(shape.begin(), rows.batch);
  return reshape(take_rows(x_rows, rows.place, rows.index, false), shape);
}

}  // namespace mixlab
