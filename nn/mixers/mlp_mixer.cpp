// mlp-mixer: the token-mixing MLP of MLP-Mixer (Tolstikhin et al. 2021; mixers.md §4).
//
//   X̃ = X with invalid rows zeroed, padded with zero rows to ℓ                  ([B, ℓ, d])
//   Y[:, c] = W₂ GELU(W₁ X̃[:, c] + b₁) + b₂      per channel c, shared over channels
//   (W₁ : ℓ → D_S, W₂ : D_S → ℓ, Linear layers applied along the token axis), first N rows
//
// D_S = 2ℓ by default (option "token-hidden"; 0 means 2ℓ). The channel MLP is the block's FFN.
// Init: weights normal with std 1/√fan_in (fan_in ℓ for W₁, D_S for W₂), biases 0.
// Every sequence is seen as the same ℓ-row input, so the padding property and exact length
// equivalence hold for any N ≤ ℓ. Causal use is refused (every hidden unit sees every token).
// Params 2ℓD_S + D_S + ℓ. Parameters: w_1.weight [D_S, ℓ], w_1.bias [D_S], w_2.weight [ℓ, D_S],
// w_2.bias [ℓ].
#include <cmath>

#include "core/random.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

int64_t token_hidden(const MixerConfig& c) {
  int64_t ds = c.get_int("token-hidden", 0);
  return ds == 0 ? 2 * c.max_len : ds;
}

class MlpMixer : public Mixer {
 public:
  explicit MlpMixer(const MixerConfig& c) : Mixer(c) {
    Generator gen(c.seed);
    int64_t l = c.max_len, ds = token_hidden(c);
    w_1 = register_module("w_1", std::make_shared<Linear>(l, ds, true, gen));
    w_2 = register_module("w_2", std::make_shared<Linear>(ds, l, true, gen));
    // The spec's initialisation replaces Linear's xavier default (drawn after it, from the same
    // generator, so it is still a function of the seed alone).
    assign_in_place(w_1->weight, init::normal({ds, l}, 1.0 / std::sqrt(double(l)), gen));
    assign_in_place(w_2->weight, init::normal({l, ds}, 1.0 / std::sqrt(double(ds)), gen));
  }
  std::string type_name() const override { return "MlpMixer"; }
  std::string extra_repr() const override {
    return "max_len=" + std::to_string(config_.max_len) +
           ", token_hidden=" + std::to_string(w_1->out_features);
  }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1);
    Tensor xp = mixers::pad_rows(mixers::zero_invalid_rows(x, ctx.valid), config_.max_len);
    Tensor t = transpose(xp, 1, 2);  // [B, d, ℓ]: each channel's column of tokens
    capture_mixing(*this, "token-mixing Jacobian, mean over channels", RowRule::Free, [&] {
      Tensor hidden = w_1->forward(t);  // [B, d, D_S], before the GELU (only when inspected)
      return token_mlp_jacobian(w_1->weight, hidden, w_2->weight, n, ctx.valid);
    });
    // w_2(gelu(w_1(t))) as one op, biases and GELU in the products' epilogues.
    Tensor y = feed_forward(t, w_1->weight, w_1->bias, w_2->weight, w_2->bias);
    return narrow(transpose(y, 1, 2), 1, 0, n);
  }

 private:
  std::shared_ptr<Linear> w_1, w_2;
};

}  // namespace

void register_mlp_mixer_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "mlp-mixer";
  info.summary =
      "token-mixing MLP W₂·GELU(W₁·x + b₁) + b₂ along tokens per channel, padded to ℓ "
      "(Tolstikhin et al. 2021)";
  info.capabilities.length = LengthSupport::PaddedToMaxLen;
  info.capabilities.causal = false;
  info.capabilities.causal_refusal =
      "every hidden unit of the token MLP sees every token, so no output can ignore the future.";
  info.options = {MixerOption::integer(
      "token-hidden", "0", "hidden width D_S of the token MLP (0 means 2ℓ)", 0, kMaxOptionSize)};
  info.build = [](const MixerConfig& c) { return std::make_shared<MlpMixer>(c); };
  info.expected_parameters = [](const MixerConfig& c) {
    int64_t l = c.max_len, ds = token_hidden(c);
    return 2 * l * ds + ds + l;
  };
  registry.add(std::move(info));
}

}  // namespace mixlab
