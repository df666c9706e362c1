// Encoder and decoder blocks (mixers.md §1), identical for every mixer except the per-mixer
// exceptions the mixer's BlockStyle names:
//   PreNorm   x ← x + Drop(Mixer(LN₁(x))),  x ← x + Drop(FFN(LN₂(x)))
//   ResMLP    x ← x + Drop(γ₁ ⊙ Mixer(Aff₁(x))),  x ← x + Drop(γ₂ ⊙ FFN(Aff₂(x)))
//   NoPreNorm x ← x + Drop(Mixer(x)),  x ← x + Drop(FFN(LN₂(x)))       (ffonly)
//   Unit      x ← x + Drop(Unit(LN₁(x)))                               (gmlp, amlp: no FFN)
// The decoder adds x ← x + Drop(CrossAttention(LN(x), memory)) after the self-mixer.
// With stochastic depth (drop_path > 0, nn/drop_path.h) every branch h above is DropPath(h) in
// training: one Bernoulli draw per sequence and branch.
#pragma once
#include <memory>

#include "nn/drop_path.h"
#include "nn/layers.h"
#include "nn/mixer.h"

namespace mixlab {

// A block's settings: the mixer, widths and dropout.
struct BlockConfig {
  MixerConfig mixer;
  int64_t ffn_dim = 0;  // f; 0 means 4d
  double dropout = 0.1;
  double drop_path = 0;  // this block's stochastic-depth rate (0: off)
};

// A norm that is LayerNorm or ResMLP's affine map, chosen by the block style.
class BlockNorm : public Module {
 public:
  BlockNorm(BlockStyle style, int64_t dim);
  std::string type_name() const override { return "BlockNorm"; }
  Tensor forward(const Tensor& x) const;
  // The LayerNorm when this norm is one (the fused residual kernel applies it), else null.
  const LayerNorm* layer_norm() const { return ln_.get(); }

 private:
  std::shared_ptr<LayerNorm> ln_;
  std::shared_ptr<Affine> affine_;
};

class EncoderBlock : public Module {
 public:
  EncoderBlock(const BlockConfig& config, Generator& gen);
  std::string type_name() const override { return "EncoderBlock"; }
  // x [B, N, d], or the real tokens' rows [R, d] when ctx.rows is defined (the same for the
  // decoder block's contexts).
  Tensor forward(const Tensor& x, const MixerContext& ctx);
  const std::shared_ptr<Mixer>& mixer() const { return mixer_; }

 private:
  BlockStyle style_;
  std::shared_ptr<Mixer> mixer_;
  std::shared_ptr<BlockNorm> norm1_, norm2_;
  std::shared_ptr<LayerScale> scale1_, scale2_;
  std::shared_ptr<FeedForward> ffn_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<DropPath> drop_path_;  // null when the block's rate is 0
};

// Per-sequence decoding state of one decoder block.
struct DecoderBlockCache {
  std::unique_ptr<MixerCache> self, cross;
};

class DecoderBlock : public Module {
 public:
  // `self` must be causal; `cross` is the cross-attention's config (cross = true).
  DecoderBlock(const BlockConfig& self, const MixerConfig& cross, Generator& gen);
  std::string type_name() const override { return "DecoderBlock"; }
  Tensor forward(const Tensor& x, const MixerContext& self_ctx, const MixerContext& cross_ctx);
  // One new position x_t [B, 1, d] with the block's cache; equals forward()'s row at that position.
  Tensor step(const Tensor& x_t, DecoderBlockCache& cache, const MixerContext& self_ctx,
              const MixerContext& cross_ctx);
  DecoderBlockCache new_cache() const;
  const std::shared_ptr<Mixer>& self_mixer() const { return self_; }
  const std::shared_ptr<Mixer>& cross_mixer() const { return cross_; }

 private:
  BlockStyle style_;
  std::shared_ptr<Mixer> self_, cross_;
  std::shared_ptr<BlockNorm> norm1_, norm2_, norm3_;
  std::shared_ptr<LayerScale> scale1_, scale2_, scale3_;
  std::shared_ptr<FeedForward> ffn_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<DropPath> drop_path_;  // null when the block's rate is 0
};

}  // namespace mixlab
