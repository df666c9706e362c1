// The convolutional tokenizer of a compact convolutional transformer (Hassani et al. 2021,
// "Escaping the big data paradigm with compact transformers"): instead of cutting an image into
// p×p patches, S = log₂ p stages of
//     3×3 convolution (zero padding 1, stride 1) → ReLU → 2×2 max-pool (stride 2)
// turn [B, C, H, W] into (H/p)·(W/p) tokens of width d, in the raster order of the patches
// (mixers.md §1). It gives the mixer local, translation-equivariant features, the inductive bias
// a patch embedding lacks. Stage s of S has d / 2^(S-s) channels, so the last has d.
#pragma once
#include <memory>
#include <vector>

#include "nn/layers.h"

namespace mixlab {

class ConvTokenizer : public Module {
 public:
  ConvTokenizer(int64_t channels, int64_t height, int64_t width, int64_t patch, int64_t dim,
                Generator& gen);
  std::string type_name() const override { return "ConvTokenizer"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& images) const;  // [B, C·H·W] -> [B, (H/p)·(W/p), d]
  int64_t num_patches() const { return (height / patch) * (width / patch); }
  // The parameters it holds, from its sizes alone (for planning a model's size).
  static int64_t parameters_for(int64_t channels, int64_t patch, int64_t dim);
  // Output channels of each stage (the last is dim); empty when patch is not a power of two ≥ 2.
  static std::vector<int64_t> stage_channels(int64_t patch, int64_t dim);
  int64_t channels, height, width, patch;
  // Stage s: a 3×3 convolution as Linear(9·C_in → C_out) on each pixel's neighbourhood, whose
  // weight columns run over (row offset, column offset, input channel).
  std::vector<std::shared_ptr<Linear>> convs;

 private:
  // Stage s's neighbourhood index (neighbourhood_index below): a transient buffer, so it moves
  // with the model to a GPU and no checkpoint holds it.
  std::vector<Tensor> neighbourhoods_;
};

// The 3×3 neighbourhoods of an h×w grid in raster order, for select_rows: entry 9·p + 3·i + j is
// the pixel at row offset i - 1 and column offset j - 1 from pixel p, or h·w (a row of zeros
// placed after the grid) where that falls outside it.
std::vector<int32_t> neighbourhood_index(int64_t h, int64_t w);

}  // namespace mixlab
