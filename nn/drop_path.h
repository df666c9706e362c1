// Stochastic depth (Huang et al., 2016, "Deep networks with stochastic depth"; timm's DropPath):
// in training, each sequence's residual branch is dropped whole with probability p and the kept
// branches are scaled by 1/(1-p), so a block's expected output is unchanged:
//   x ← x + m_b/(1-p) · h,   m_b ~ Bernoulli(1-p), one draw per sequence b.
// In evaluation it is the identity. The blocks apply it to every residual branch, deeper blocks
// with larger p: block l of L gets p_l = p · l/L (nn/models.cpp), the paper's linear rule.
#pragma once
#include <cstdint>

#include "nn/module.h"
#include "nn/token_rows.h"

namespace mixlab {

// The rate of block `block` (from 0) of `depth` when the deepest has rate p: p·(block+1)/depth.
inline double drop_path_rate(double p, int64_t block, int64_t depth) {
  return p * static_cast<double>(block + 1) / static_cast<double>(depth);
}

// h [B, ...] (batch first), or the packed rows [R, ...] of `rows` when it is defined: every row
// of sequence b gets b's factor. The B draws come from a Generator seeded with `seed`, in batch
// order, so a batch gives the same masks packed or padded. p = 0 returns h itself.
Tensor drop_path(const Tensor& h, double p, uint64_t seed, const TokenRows& rows = {});

// The block's module: draws its seed from the default generator (saved in checkpoints, so a
// resumed run draws the same masks) only in training with p > 0, as Dropout does.
class DropPath : public Module {
 public:
  explicit DropPath(double p) : p(p) {}
  std::string type_name() const override { return "DropPath"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& h, const TokenRows& rows) const;
  double p;
};

}  // namespace mixlab
