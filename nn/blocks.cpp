#include "nn/blocks.h"

#include "autograd/ops.h"
#include "nn/mixer_registry.h"

namespace mixlab {

namespace {
constexpr double kLayerScaleInit = 0.1;  // ResMLP's γ initialisation (mixers.md §5)
int64_t ffn_width(const BlockConfig& c) { return c.ffn_dim > 0 ? c.ffn_dim : 4 * c.mixer.dim; }

// x + Drop(h) in one kernel. The seed is drawn exactly where Dropout::forward would draw it (only
// in training with p > 0), so the masks and every later draw are the unfused path's.
struct Residual {
  Tensor sum, normed;
};
double drop_rate(const Dropout& drop) { return drop.is_training() ? drop.p : 0.0; }
uint64_t drop_seed(double rate) { return rate > 0 ? default_generator().next_u64() : 0; }

// The mixer on the block's input: [B, N, d], or the real tokens' rows [R, d] when ctx.rows says
// the model packed them (everything else in a block is position-wise and takes either).
Tensor mix(Mixer& mixer, const Tensor& x, const MixerContext& ctx) {
  return ctx.rows.defined() ? mixer.forward_rows(x, ctx) : mixer.forward(x, ctx);
}

// A residual branch under stochastic depth (identity without it, or in evaluation).
Tensor branch(const Tensor& h, const std::shared_ptr<DropPath>& drop_path, const TokenRows& rows) {
  return drop_path ? drop_path->forward(h, rows) : h;
}

Tensor residual(const Tensor& x, const Tensor& h, const Dropout& drop) {
  double p = drop_rate(drop);
  return add_dropout(x, h, p, drop_seed(p));
}

// y = x + Drop(h) and norm(y), in one row kernel when the norm is a LayerNorm.
Residual residual_norm(const Tensor& x, const Tensor& h, const Dropout& drop,
                       const BlockNorm& norm) {
  const LayerNorm* ln = norm.layer_norm();
  if (!ln) {
    Tensor y = residual(x, h, drop);
    return {y, norm.forward(y)};
  }
  double p = drop_rate(drop);
  ResidualNorm r = add_dropout_layer_norm(x, h, p, drop_seed(p), ln->weight, ln->bias, ln->eps);
  return {r.sum, r.normed};
}
}  // namespace

BlockNorm::BlockNorm(BlockStyle style, int64_t dim) {
  if (style == BlockStyle::ResMLP)
    affine_ = register_module("affine", std::make_shared<Affine>(dim));
  else
    ln_ = register_module("ln", std::make_shared<LayerNorm>(dim));
}
Tensor BlockNorm::forward(const Tensor& x) const {
  return affine_ ? affine_->forward(x) : ln_->forward(x);
}

// ---- encoder ----
EncoderBlock::EncoderBlock(const BlockConfig& c, Generator& gen) {
  mixer_ = register_module("mixer", make_mixer(c.mixer));
  style_ = mixer_->capabilities().block;
  int64_t d = c.mixer.dim;
  if (style_ != BlockStyle::NoPreNorm)
    norm1_ = register_module("norm1", std::make_shared<BlockNorm>(style_, d));
  if (style_ != BlockStyle::Unit) {
    norm2_ = register_module("norm2", std::make_shared<BlockNorm>(style_, d));
    ffn_ = register_module("ffn", std::make_shared<FeedForward>(d, ffn_width(c), gen));
  }
  if (style_ == BlockStyle::ResMLP) {
    scale1_ = register_module("scale1", std::make_shared<LayerScale>(d, kLayerScaleInit));
    scale2_ = register_module("scale2", std::make_shared<LayerScale>(d, kLayerScaleInit));
  }
  drop_ = register_module("drop", std::make_shared<Dropout>(c.dropout));
  if (c.drop_path > 0)
    drop_path_ = register_module("drop_path", std::make_shared<DropPath>(c.drop_path));
}

Tensor EncoderBlock::forward(const Tensor& x, const MixerContext& ctx) {
  Tensor h = mix(*mixer_, norm1_ ? norm1_->forward(x) : x, ctx);
  if (scale1_) h = scale1_->forward(h);
  h = branch(h, drop_path_, ctx.rows);
  if (!ffn_) return residual(x, h, *drop_);  // gMLP/aMLP: the unit is the whole block
  Residual y = residual_norm(x, h, *drop_, *norm2_);
  Tensor f = ffn_->forward(y.normed);
  if (scale2_) f = scale2_->forward(f);
  return residual(y.sum, branch(f, drop_path_, ctx.rows), *drop_);
}

// ---- decoder ----
DecoderBlock::DecoderBlock(const BlockConfig& c, const MixerConfig& cross, Generator& gen) {
  check(c.mixer.causal, "decoder block: the self-mixer must be built causal");
  self_ = register_module("self_mixer", make_mixer(c.mixer));
  cross_ = register_module("cross", make_mixer(cross));
  style_ = self_->capabilities().block;
  int64_t d = c.mixer.dim;
  norm1_ = register_module("norm1", std::make_shared<BlockNorm>(style_, d));
  norm2_ = register_module("norm2", std::make_shared<BlockNorm>(style_, d));
  if (style_ != BlockStyle::Unit) {
    norm3_ = register_module("norm3", std::make_shared<BlockNorm>(style_, d));
    ffn_ = register_module("ffn", std::make_shared<FeedForward>(d, ffn_width(c), gen));
  }
  if (style_ == BlockStyle::ResMLP) {
    scale1_ = register_module("scale1", std::make_shared<LayerScale>(d, kLayerScaleInit));
    scale2_ = register_module("scale2", std::make_shared<LayerScale>(d, kLayerScaleInit));
    scale3_ = register_module("scale3", std::make_shared<LayerScale>(d, kLayerScaleInit));
  }
  drop_ = register_module("drop", std::make_shared<Dropout>(c.dropout));
  if (c.drop_path > 0)
    drop_path_ = register_module("drop_path", std::make_shared<DropPath>(c.drop_path));
}

// Every branch's output is on the decoder's positions, so self_ctx.rows places all three.
Tensor DecoderBlock::forward(const Tensor& x, const MixerContext& self_ctx,
                             const MixerContext& cross_ctx) {
  const TokenRows& rows = self_ctx.rows;
  Tensor h = mix(*self_, norm1_->forward(x), self_ctx);
  if (scale1_) h = scale1_->forward(h);
  Residual y = residual_norm(x, branch(h, drop_path_, rows), *drop_, *norm2_);
  Tensor c = mix(*cross_, y.normed, cross_ctx);
  if (scale2_) c = scale2_->forward(c);
  c = branch(c, drop_path_, rows);
  if (!ffn_) return residual(y.sum, c, *drop_);
  Residual z = residual_norm(y.sum, c, *drop_, *norm3_);
  Tensor f = ffn_->forward(z.normed);
  if (scale3_) f = scale3_->forward(f);
  return residual(z.sum, branch(f, drop_path_, rows), *drop_);
}

DecoderBlockCache DecoderBlock::new_cache() const {
  return DecoderBlockCache{self_->new_cache(), cross_->new_cache()};
}

// Decoding runs in evaluation, where DropPath is the identity.
Tensor DecoderBlock::step(const Tensor& x_t, DecoderBlockCache& cache, const MixerContext& self_ctx,
                          const MixerContext& cross_ctx) {
  Tensor h = self_->step(norm1_->forward(x_t), *cache.self, self_ctx);
  if (scale1_) h = scale1_->forward(h);
  Residual y = residual_norm(x_t, h, *drop_, *norm2_);
  Tensor c = cross_->step(y.normed, *cache.cross, cross_ctx);
  if (scale2_) c = scale2_->forward(c);
  if (!ffn_) return residual(y.sum, c, *drop_);
  Residual z = residual_norm(y.sum, c, *drop_, *norm3_);
  Tensor f = ffn_->forward(z.normed);
  if (scale3_) f = scale3_->forward(f);
  return residual(z.sum, f, *drop_);
}

}  // namespace mixlab
