// hcsa: hard-coded Gaussian self-attention (mixers.md §10; You, Sun and Iyyer 2020).
//
//   V = X W_V                                            (no bias)
//   w_k[i,j] = exp(−(j − i − o_k)² / 2) / √(2π)           (σ = 1, per head k with offset o_k)
//   O_k = w_k V_k                                         (no softmax, no renormalisation)
//   Y = concat_k(O_k) W_O                                 (no bias)
//
// Offsets cycle over the heads: (−1, +1, −1, +1, …) when not causal, (−1, 0, −1, 0, …) when
// causal. Padding: weights to invalid positions j are zeroed, not renormalised (exact). Causal:
// weights to j > i are zeroed, not renormalised (exact; with offset 0 the rows i ≥ 3 sum to about
// 0.699, rows 0, 1, 2 to 0.399, 0.641, 0.695). Xavier W_V, W_O. Params 2d². Any length.
// The weights are a constant built from index tensors with ops (no loops over elements).
// Incremental decoding caches the V rows and computes one row of weights per step.
// Parameter names: w_v, w_o (Linear layers without bias: .weight [d, d]).
#include <cmath>
#include <numbers>

#include "core/random.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

class HardCodedGaussianAttention : public Mixer {
 public:
  explicit HardCodedGaussianAttention(const MixerConfig& c) : Mixer(c) {
    Generator gen(c.seed);
    w_v = register_module("w_v", std::make_shared<Linear>(c.dim, c.dim, false, gen));
    w_o = register_module("w_o", std::make_shared<Linear>(c.dim, c.dim, false, gen));
  }
  std::string type_name() const override { return "HardCodedGaussianAttention"; }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1);
    Tensor v = mixers::split_heads(w_v->forward(x), config_.heads);  // [B, h, N, d_h]
    Tensor w = weights(0, n, n, x.dtype(), x.device());              // [h, N, N]
    Tensor keys = mixers::key_mask(ctx.valid);                       // [B, 1, 1, N]
    if (keys.defined()) w = mul(w, keys);
    capture_mixing(*this, "fixed Gaussian weights", RowRule::Gaussian, [&] { return w; });
    return w_o->forward(mixers::merge_heads(matmul(w, v)));
  }

  struct Cache : MixerCache {
    Tensor v;  // [B, h, t, d_h]
    std::vector<Tensor*> batch_tensors() override { return {&v}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    Tensor v = mixers::split_heads(w_v->forward(x_t), config_.heads);
    cache.v = cache.v.defined() ? concat({cache.v, v}, 2) : v;
    int64_t t = cache.position++;
    Tensor w = weights(t, 1, t + 1, x_t.dtype(), x_t.device());  // [h, 1, t+1]
    return w_o->forward(mixers::merge_heads(matmul(w, cache.v)));
  }

 private:
  // w_k[i, j] for queries i = first .. first+nq-1 and keys j = 0 .. nk-1: [h, nq, nk], with
  // the causal zeros (j > i) when built causal.
  Tensor weights(int64_t first, int64_t nq, int64_t nk, DType dtype, Device device) const {
    int64_t h = config_.heads;
    std::vector<double> offsets(h);
    for (int64_t k = 0; k < h; ++k) offsets[k] = k % 2 == 0 ? -1.0 : (config_.causal ? 0.0 : 1.0);
    Tensor o = to_device(cast(Tensor::from_data(offsets, {h, 1, 1}), dtype), device);
    Tensor i =
        add(reshape(Tensor::arange(nq, dtype, device), {1, nq, 1}), static_cast<double>(first));
    Tensor j = reshape(Tensor::arange(nk, dtype, device), {1, 1, nk});
    Tensor diff = sub(sub(j, i), o);  // j − i − o_k
    Tensor w = mul(exp(mul(mul(diff, diff), -0.5)), 1.0 / std::sqrt(2.0 * std::numbers::pi));
    if (config_.causal) w = mul(w, tril_mask(nq, nk, first, dtype, device));
    return w;
  }

  std::shared_ptr<Linear> w_v, w_o;
};

}  // namespace

void register_hcsa_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "hcsa";
  info.summary =
      "hard-coded Gaussian attention: fixed weights exp(−(j−i−o_k)²/2)/√(2π) per head, no "
      "softmax (You et al. 2020)";
  info.capabilities.length = LengthSupport::Any;
  info.build = [](const MixerConfig& c) { return std::make_shared<HardCodedGaussianAttention>(c); };
  info.expected_parameters = [](const MixerConfig& c) { return 2 * c.dim * c.dim; };
  registry.add(std::move(info));
}

}  // namespace mixlab
