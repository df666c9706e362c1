// The real tokens of a right-padded batch as rows. Everything in a block but the mixer is
// position-wise (norms, projections, the FFN, dropout, residuals), so it can run on the real
// tokens alone: a batch of CMUdict words padded to its longest spends a fifth of its products on
// padding otherwise. A model that packs its tokens (pack_rows) runs its blocks on [R, d] and
// hands the mixers MixerContext::rows; a mixer places the rows back into a zero-padded [B, N, d]
// for the part that mixes positions (Mixer::forward_rows), which changes nothing at the valid
// positions of a mixer with the padding property (mixers.md §0).
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tensor.h"

namespace mixlab {

struct TokenRows {
  // int32 [R]: b·N + t of each real token, sequence by sequence in `order`. By default the
  // sequences go by length (shortest first, batch order within a length), so each length is one
  // [count, length] block of rows that self-attention reads in place without padding
  // (fused_self_attention_groups).
  Tensor index;
  Tensor place;  // int32 [B·N]: the row of each position b·N + t, or -1 at the padding
  std::vector<SequenceGroup> groups;  // runs of sequences of one length, in row order
  std::vector<int64_t> order;         // the sequences (batch indices) in row order
  std::vector<int32_t> lengths;       // each sequence's length, by batch index
  int64_t batch = 0, length = 0;      // B, N of the padded layout
  bool defined() const { return index.defined(); }
  int64_t count() const { return index.defined() ? index.numel() : 0; }  // R
};

// The rows of a [B, N] batch with these lengths (padding on the right), the sequences in
// `order` (a permutation of the batch; empty: by length). Undefined when there is nothing to
// skip: no lengths, every sequence N long, or no real token at all.
TokenRows token_rows(const std::vector<int32_t>& lengths, int64_t n, Device device,
                     const std::vector<int64_t>& order = {});

// The batch's sequences ordered by (first length, second length), batch order among equals: an
// order for token_rows that keeps both sides' groups long when one side attends to the other.
std::vector<int64_t> order_by_lengths(const std::vector<int32_t>& first,
                                      const std::vector<int32_t>& second);

// Cross-attention's groups between queries' rows and keys' rows of the same batch in the same
// sequence order: runs of sequences with equal (query length, key length). Empty when the two do
// not share their batch and order (the caller then takes the padded path).
std::vector<CrossGroup> cross_groups(const TokenRows& queries, const TokenRows& keys);

// x [B, N, ...] -> its real rows [R, ...].
Tensor pack_rows(const Tensor& x, const TokenRows& rows);
// x_rows [R, ...] -> [B, N, ...] with zeros at the padding.
Tensor unpack_rows(const Tensor& x_rows, const TokenRows& rows);

}  // namespace mixlab
