// ffonly: feed-forward across tokens (Melas-Kyriazi 2021, "Do you even need attention?";
// mixers.md §6).
//
//   X̃ = X padded with zero rows to ℓ, v = valid padded with 0 to ℓ     (the mixer pads itself)
//   T = X̃ᵀ                                                              ([B, d, ℓ])
//   μ = Σ_j v_j T[:, j] / n,  σ² = Σ_j v_j (T[:, j] − μ)² / n,  n = max(1, Σ_j v_j)
//   LN_t(T)[:, j] = v_j · (γ_j (T[:, j] − μ) / √(σ² + 1e-5) + β_j)     (invalid entries zeroed)
//   Y = (MLP_t(LN_t(T)))ᵀ[:N],  MLP_t = Linear(ℓ→4ℓ) · GELU · Linear(4ℓ→ℓ) over the ℓ positions
//
// LN_t normalises each channel over its valid tokens (biased variance) with per-position gain γ
// and bias β ∈ R^ℓ (1 and 0 at init); fc1, fc2 init normal std 0.02, biases 0. The block has no
// LayerNorm before this mixer (capabilities.block = NoPreNorm). Padding property and exact
// length equivalence hold (statistics over valid tokens only, invalid entries zeroed after LN_t,
// every sequence padded to ℓ). Causal use is refused. Params 8ℓ² + 7ℓ.
// Parameters: ln_t.weight [ℓ] (γ), ln_t.bias [ℓ] (β), fc1.weight [4ℓ, ℓ], fc1.bias [4ℓ],
// fc2.weight [ℓ, 4ℓ], fc2.bias [ℓ].
#include "core/random.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr double kEps = 1e-5;

class FfOnly : public Mixer {
 public:
  explicit FfOnly(const MixerConfig& c) : Mixer(c) {
    Generator gen(c.seed);
    int64_t l = c.max_len;
    // Only its gain and bias are used (the statistics are masked, see forward()).
    ln_t = register_module("ln_t", std::make_shared<LayerNorm>(l, kEps));
    fc1 = register_module("fc1", std::make_shared<Linear>(l, 4 * l, true, gen));
    fc2 = register_module("fc2", std::make_shared<Linear>(4 * l, l, true, gen));
    // The spec's initialisation replaces Linear's xavier default (drawn after it, from the same
    // generator, so it is still a function of the seed alone).
    assign_in_place(fc1->weight, init::normal({4 * l, l}, 0.02, gen));
    assign_in_place(fc2->weight, init::normal({l, 4 * l}, 0.02, gen));
  }
  std::string type_name() const override { return "FfOnly"; }
  std::string extra_repr() const override { return "max_len=" + std::to_string(config_.max_len); }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1);
    Tensor ln = token_layer_norm(x, ctx.valid);  // LN_t(T), [B, d, ℓ]
    capture_mixing(
        *this, "token-MLP Jacobian after the token LayerNorm, mean over channels", RowRule::Free,
        [&] {  // the pre-GELU hidden layer [B, d, 4ℓ], computed again only when inspected
          return token_mlp_jacobian(fc1->weight, fc1->forward(ln), fc2->weight, n, ctx.valid);
        });
    // fc2(gelu(fc1(ln))) as one op, biases and GELU in the products' epilogues.
    Tensor y = feed_forward(ln, fc1->weight, fc1->bias, fc2->weight, fc2->bias);  // [B, d, ℓ]
    return narrow(transpose(y, 1, 2), 1, 0, n);
  }

 private:
  // LN_t(T) [B, d, ℓ]: each channel normalised over its valid tokens, invalid entries zeroed.
  Tensor token_layer_norm(const Tensor& x, const Tensor& valid_in) const {
    int64_t b = x.size(0), n = x.size(1), l = config_.max_len;
    if (!valid_in.defined() && n == l) {
      // Every one of the ℓ positions is a valid token (v = 1, n = ℓ): LN_t is LayerNorm over
      // the last axis of T, one fused row kernel instead of a dozen element-wise passes.
      return layer_norm(contiguous(transpose(x, 1, 2)), ln_t->weight, ln_t->bias, kEps);
    }
    Tensor valid = valid_in.defined() ? valid_in : Tensor::ones({b, n}, x.dtype(), x.device());
    // [B, 1, ℓ]: 1 at valid positions, 0 at padded ones and at the rows added to reach ℓ.
    Tensor v = reshape(mixers::pad_rows(reshape(valid, {b, n, 1}), l), {b, 1, l});
    Tensor t = transpose(mixers::pad_rows(mixers::zero_invalid_rows(x, valid_in), l), 1, 2);
    Tensor count = maximum(sum(v, {2}, true), Tensor::ones({}, x.dtype(), x.device()));
    Tensor mu = div(sum(mul(t, v), {2}, true), count);  // [B, d, 1]
    Tensor centred = sub(t, mu);
    Tensor var = div(sum(mul(mul(centred, centred), v), {2}, true), count);
    Tensor normed = div(centred, sqrt(add(var, kEps)));
    return mul(add(mul(normed, ln_t->weight), ln_t->bias), v);  // invalid entries zeroed
  }

  std::shared_ptr<LayerNorm> ln_t;
  std::shared_ptr<Linear> fc1, fc2;
};

}  // namespace

void register_ffonly_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "ffonly";
  info.summary =
      "feed-forward across tokens: masked LayerNorm over tokens then Linear(ℓ→4ℓ)·GELU·"
      "Linear(4ℓ→ℓ) per channel, padded to ℓ (Melas-Kyriazi 2021)";
  info.capabilities.length = LengthSupport::PaddedToMaxLen;
  info.capabilities.block = BlockStyle::NoPreNorm;
  info.capabilities.causal = false;
  info.capabilities.causal_refusal =
      "its token statistics and its token MLP read every position, the future included.";
  info.build = [](const MixerConfig& c) { return std::make_shared<FfOnly>(c); };
  info.expected_parameters = [](const MixerConfig& c) {
    return 8 * c.max_len * c.max_len + 7 * c.max_len;
  };
  registry.add(std::move(info));
}

}  // namespace mixlab
