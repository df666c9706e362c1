// A learned relative position bias on attention's scores (mixers.md §2, `rel-bias=W`), as Swin
// Transformer's (Liu et al. 2021) and, on a sequence, Shaw et al.'s (2018) and T5's:
//
//   A_k = softmax(Q_k K_kᵀ / √d_h + B_k + M),   B_k[i, j] = T[offset(i, j), k]
//
// The tokens lie in raster order on rows of W: token i sits at row ⌊i/W⌋, column i mod W. The
// offset of key j from query i is (Δr, Δc) = (row_j − row_i, col_j − col_i), Δr clipped to
// ±(R − 1) with R = ⌈ℓ/W⌉ rows (so any length works, keys beyond ℓ sharing the farthest row's
// entries); Δc lies in ±(W − 1). T [(2R − 1)(2W − 1), h] holds one number per offset and head,
// zero at first (the mixer starts as plain attention). W = 1 is a sequence: one offset j − i.
// On an image's 7×7 tokens, W = 7: a bias for each of the 13×13 two-dimensional offsets.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/module.h"

namespace mixlab {

class RelativePositionBias : public Module {
 public:
  RelativePositionBias(int64_t heads, int64_t max_len, int64_t width);
  std::string type_name() const override { return "RelativePositionBias"; }
  std::string extra_repr() const override;

  // B for queries [from, from + queries) against keys [0, keys): [1, h, queries, keys], the
  // shape the attention core broadcasts over the batch.
  Tensor bias(int64_t from, int64_t queries, int64_t keys) const;
  // The table's rows: (2R − 1)(2W − 1).
  static int64_t offsets(int64_t max_len, int64_t width);

  Tensor table;  // T [(2R − 1)(2W − 1), h]

 private:
  // offset(i, j) for the queries and keys asked, row-major, as table rows.
  std::vector<int32_t> offset_rows(int64_t from, int64_t queries, int64_t keys) const;
  int64_t heads_, max_len_, width_, rows_;
  Tensor index_;  // offset(i, j) for i, j < ℓ: a transient buffer that moves with the model
};

}  // namespace mixlab
