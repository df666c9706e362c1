// ListOps (Nangia and Bowman 2018) as generated for the Long Range Arena (Tay et al. 2021):
// nested [MIN / [MAX / [MED / [SM expressions over the digits 0-9, each closed by "]", labelled
// with their value. The generator follows LRA's listops.py with mixlab's own PRNG, so the data
// are the same on every platform for a given seed (not the same examples as LRA's release).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/seq2seq_text.h"
#include "train/data/vocab.h"

namespace mixlab {

struct ListOpsConfig {
  int max_depth = 10;      // the root is at depth 1; a node at max_depth is always a leaf
  int max_args = 10;       // an operator node has 2..max_args children (uniform)
  int64_t min_len = 500;   // kept expressions have min_len <= tokens <= max_len (both
  int64_t max_len = 2000;  // inclusive; LRA's script uses strict bounds, a negligible difference)
  int64_t count = 1000;    // number of distinct expressions to return
  uint64_t seed = 0;
};

// `config.count` distinct expressions (tokens, label), in generation order. Each draw builds a
// tree as LRA does: at depth < max_depth a node is a leaf (a uniform digit) with probability 0.75,
// else it picks an operator uniformly, 2..max_args children, and recurses at depth + 1. Trees
// whose token count falls outside [min_len, max_len] and repeats of an earlier expression are
// discarded. Throws Error on invalid parameters, or when 1000 * count + 100000 draws have not
// produced `count` expressions (the length window or the number of distinct trees is too small).
std::vector<LabelledTokens> listops_generate(const ListOpsConfig& config);

// The value of an expression: MIN, MAX, SM = sum mod 10, MED = the median truncated to an
// integer as LRA's int(np.median(...)): for an even number of arguments the mean of the two middle
// values rounded down (all values are non-negative). Throws Error on a malformed expression.
int32_t listops_eval(const std::vector<std::string>& tokens);

// The same expressions as listops_generate(config), already encoded with listops_vocab() (`src`
// without specials, `label`). Prefer this at LRA scale: it never holds the expressions as strings
// (100,000 expressions of ~1,000 tokens would take gigabytes as std::string tokens).
InMemoryDataset listops_dataset(const ListOpsConfig& config);

// The fixed ListOps vocabulary: specials, then "0".."9", "[MIN", "[MAX", "[MED", "[SM", "]".
Vocab listops_vocab();

}  // namespace mixlab
