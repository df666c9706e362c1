#include "nn/token_rows.h"

#include <algorithm>

#include "autograd/ops.h"
#include "core/error.h"

namespace mixlab {

TokenRows token_rows(const std::vector<int32_t>& lengths, int64_t n, Device device,
                     const std::vector<int64_t>& order) {
  const int64_t batch = static_cast<int64_t>(lengths.size()), all = batch * n;
  for (int32_t l : lengths)
    check(l >= 0 && l <= n, "token_rows: length ", l, " outside [0, ", n, "]");
  TokenRows rows;
  rows.lengths = lengths;
  rows.order = order;
  if (order.empty()) {
    rows.order.resize(batch);
    for (int64_t b = 0; b < batch; ++b) rows.order[b] = b;
    std::stable_sort(rows.order.begin(), rows.order.end(),
                     [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
  }
  std::vector<bool> seen(batch, false);
  check(static_cast<int64_t>(rows.order.size()) == batch, "token_rows: an order of ",
        rows.order.size(), " sequences for a batch of ", batch);
  for (int64_t b : rows.order) {
    check(b >= 0 && b < batch && !seen[b], "token_rows: the order is not a permutation of the ",
          batch, " sequences");
    seen[b] = true;
  }
  std::vector<int32_t> index, place(all, -1);
  for (int64_t b : rows.order) {
    const int64_t length = lengths[b];
    if (length == 0) continue;
    if (rows.groups.empty() || rows.groups.back().length != length)
      rows.groups.push_back({0, length});
    ++rows.groups.back().count;
    for (int64_t t = 0; t < length; ++t) {
      place[b * n + t] = static_cast<int32_t>(index.size());
      index.push_back(static_cast<int32_t>(b * n + t));
    }
  }
  if (index.empty() || static_cast<int64_t>(index.size()) == all) return TokenRows();
  rows.index = Tensor::from_data(index, {static_cast<int64_t>(index.size())}, device);
  rows.place = Tensor::from_data(place, {all}, device);
  rows.batch = batch;
  rows.length = n;
  return rows;
}

std::vector<int64_t> order_by_lengths(const std::vector<int32_t>& first,
                                      const std::vector<int32_t>& second) {
  check(first.size() == second.size(), "order_by_lengths: ", first.size(), " and ", second.size(),
        " lengths");
  std::vector<int64_t> order(first.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = static_cast<int64_t>(b);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return first[a] != first[b] ? first[a] < first[b] : second[a] < second[b];
  });
  return order;
}

std::vector<CrossGroup> cross_groups(const TokenRows& queries, const TokenRows& keys) {
  std::vector<CrossGroup> groups;
  if (!queries.defined() || !keys.defined() || queries.order != keys.order) return groups;
  for (int64_t b : queries.order) {
    const int64_t n = queries.lengths[b], m = keys.lengths[b];
    if (groups.empty() || groups.back().query_length != n || groups.back().key_length != m)
      groups.push_back({0, n, m});
    ++groups.back().count;
  }
  return groups;
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
