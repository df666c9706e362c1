// The standard layers every mixer and block is built from.
#pragma once
#include <memory>

#include "core/random.h"
#include "nn/module.h"

namespace mixlab {

// y = x Wᵀ + b, weight stored [out, in] (maps one to one onto torch.nn.Linear).
// Default initialisation: xavier (Glorot uniform) weight, zero bias (the spec's default).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias, Generator& gen);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // bias undefined when built without
  int64_t in_features, out_features;
};

// Token lookup, initialised N(0, 0.02²).
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim, Generator& gen);
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& ids) const;  // int32 ids [...] -> [..., dim]
  Tensor weight;
};

// LayerNorm over the last axis: gain 1, bias 0, eps 1e-5, biased variance.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
  double eps;
};

// ResMLP's per-channel affine map Aff(x) = α ⊙ x + β (α = 1, β = 0 at init).
class Affine : public Module {
 public:
  explicit Affine(int64_t dim);
  std::string type_name() const override { return "Affine"; }
  Tensor forward(const Tensor& x) const;
  Tensor alpha, beta;
};

// LayerScale: y = γ ⊙ x with γ ∈ R^d initialised to a constant (0.1 in ResMLP).
class LayerScale : public Module {
 public:
  LayerScale(int64_t dim, double init_value);
  std::string type_name() const override { return "LayerScale"; }
  Tensor forward(const Tensor& x) const;
  Tensor gamma;
};

// Dropout whose masks come from the default generator (saved in checkpoints, so a resumed run
// draws the same masks). Identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p) : p(p) {}
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  double p;
};

// The position-wise FFN: Linear(d→f) · GELU · Linear(f→d), f = 4d by default.
class FeedForward : public Module {
 public:
  FeedForward(int64_t dim, int64_t hidden, Generator& gen);
  std::string type_name() const override { return "FeedForward"; }
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> fc1, fc2;
};

enum class PositionKind { Learned, Sinusoidal, None };
PositionKind parse_position_kind(const std::string& name);  // learned|sinusoidal|none
std::string to_string(PositionKind kind);

// Positional embeddings added to token embeddings: a learned [ℓ, d] table (N(0, 0.02²)), the
// sinusoidal table of Vaswani et al. (a buffer), or nothing.
class PositionalEmbedding : public Module {
 public:
  PositionalEmbedding(PositionKind kind, int64_t max_len, int64_t dim, Generator& gen);
  std::string type_name() const override { return "PositionalEmbedding"; }
  std::string extra_repr() const override;
  // x [B, N, d] -> x + P[offset : offset + N]; N + offset beyond ℓ is an error naming ℓ.
  Tensor forward(const Tensor& x, int64_t offset = 0) const;
  PositionKind kind;
  int64_t max_len;
  Tensor table;  // learned weight or sinusoidal buffer; undefined for None
};

// Images [B, C, H, W] (flattened as [B, C·H·W]) cut into non-overlapping p×p patches in raster
// order, each flattened in (channel, row, column) order like a Conv2d weight, then Linear(p²C→d).
class PatchEmbedding : public Module {
 public:
  PatchEmbedding(int64_t channels, int64_t height, int64_t width, int64_t patch, int64_t dim,
                 Generator& gen);
  std::string type_name() const override { return "PatchEmbedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& images) const;  // -> [B, patches, d]
  int64_t num_patches() const { return (height / patch) * (width / patch); }
  int64_t channels, height, width, patch;
  std::shared_ptr<Linear> proj;
};

}  // namespace mixlab
