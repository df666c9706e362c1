// retnet: multi-scale retention (Sun et al. 2023, "Retentive Network"; mixers.md §19).
//
//   Q = X W_Q,  K = X W_K,  V = X W_V,  G = X W_G             (W_* : d → d, no biases; h heads)
//   Q_k, K_k rotated: at position n, channels (2j, 2j+1) of a head turn by n·θ_j,
//                     θ_j = 10000^{−2j/d_h};  K_k ← K_k / √d_h;  K_k, V_k = 0 where invalid
//   γ_k = 1 − 2^{−5−k}
//   D_k[n, m] = γ_k^{n−m} for m ≤ n, else 0            (causal)
//             = γ_k^{|n−m|}                             (non-causal: two-sided)
//   Ret_k = (Q_k K_kᵀ ⊙ D_k) V_k                        (the parallel form)
//   O_k = LN_k(Ret_k)                                    (over the head's d_h channels, eps 1e-5,
//                                                         the shared affine [d]'s slice)
//   Y = (SiLU(G) ⊙ concat_k O_k) W_O                     (0 at invalid positions)
//
// The recurrent form, used by incremental decoding: S_k(n) = γ_k S_k(n−1) + K_k[n]ᵀ V_k[n],
// Ret_k[n] = Q_k[n] S_k(n), O(d·d_h) a step. It equals the causal parallel form because
// Σ_{m≤n} γ^{n−m} (q_n·k_m) v_m = q_n Σ_{m≤n} γ^{n−m} k_mᵀ v_m.
// Choices where the spec is silent:
//   - The rotation turns (x_{2j}, x_{2j+1}) into (x_{2j} cos − x_{2j+1} sin, x_{2j} sin +
//     x_{2j+1} cos); positions count from 0 at each sequence's first token.
//   - The per-head LayerNorm is a LayerNorm without affine over each head's d_h channels, then
//     one affine map with the shared weight and bias [d] (the same numbers as LN_k with its
//     slice); both start at gain 1, bias 0.
//   - The heads are the model's h (--heads), as attention's; d_h = d/h must be even, and a
//     mixer with an odd d_h is refused, naming d and h.
//   - Inspect records Q_k K_kᵀ ⊙ D_k per head as computed (signed; invalid columns are 0 because
//     K is zeroed there); its picture wants a colour scale centred on 0.
// Params: W_Q, W_K, W_V, W_G, W_O (5d²), the LayerNorm's weight and bias (2d): 5d² + 2d.
// Parameters: w_q.weight, w_k.weight, w_v.weight, w_g.weight, w_o.weight [d, d], ln.weight,
// ln.bias [d].
#include <cmath>

#include "core/random.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr double kRetentionLnEps = 1e-5;

// γ_k = 1 − 2^{−5−k}.
double retention_decay(int64_t head) { return 1.0 - std::pow(2.0, -5.0 - double(head)); }

// A float64 host table as a tensor of `like`'s dtype and device.
Tensor retention_constant(const std::vector<double>& values, const Shape& shape,
                          const Tensor& like) {
  return cast(to_device(Tensor::from_data(values, shape), like.device()), like.dtype());
}

class Retention : public Mixer {
 public:
  explicit Retention(const MixerConfig& c) : Mixer(c) {
    Generator gen(c.seed);
    const int64_t d = c.dim;
    w_q = register_module("w_q", std::make_shared<Linear>(d, d, false, gen));
    w_k = register_module("w_k", std::make_shared<Linear>(d, d, false, gen));
    w_v = register_module("w_v", std::make_shared<Linear>(d, d, false, gen));
    w_g = register_module("w_g", std::make_shared<Linear>(d, d, false, gen));
    w_o = register_module("w_o", std::make_shared<Linear>(d, d, false, gen));
    ln = register_module("ln", std::make_shared<LayerNorm>(d, kRetentionLnEps));
  }
  std::string type_name() const override { return "Retention"; }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    const int64_t h = config_.heads, n = x.size(1);
    Tensor q = rotate(mixers::split_heads(w_q->forward(x), h), 0);  // [B, h, N, d_h]
    Tensor k = mul(
        rotate(mixers::split_heads(mixers::zero_invalid_rows(w_k->forward(x), ctx.valid), h), 0),
        key_scale());
    Tensor v = mixers::split_heads(mixers::zero_invalid_rows(w_v->forward(x), ctx.valid), h);
    Tensor scores = mul(matmul(q, transpose(k, 2, 3)), decay_matrix(n, x));  // [B, h, N, N]
    capture_mixing(*this, "retention Q Kᵀ ⊙ D per head (signed)", RowRule::Free,
                   [&] { return scores; });
    Tensor y = output(matmul(scores, v), x);
    return mixers::zero_invalid_rows(y, ctx.valid);
  }

  struct Cache : MixerCache {
    Tensor s;  // [B, h, d_h, d_h]: S_k(n), each head's decayed Σ K_mᵀ V_m
    std::vector<Tensor*> batch_tensors() override { return {&s}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    const int64_t h = config_.heads, pos = cache.position;
    Tensor q = rotate(mixers::split_heads(w_q->forward(x_t), h), pos);  // [B, h, 1, d_h]
    Tensor k = mul(rotate(mixers::split_heads(w_k->forward(x_t), h), pos), key_scale());
    Tensor v = mixers::split_heads(w_v->forward(x_t), h);
    Tensor kv = matmul(transpose(k, 2, 3), v);  // K_k[n]ᵀ V_k[n]
    if (cache.s.defined()) {
      std::vector<double> gammas(static_cast<size_t>(h));
      for (int64_t head = 0; head < h; ++head) gammas[head] = retention_decay(head);
      kv = add(mul(cache.s, retention_constant(gammas, {1, h, 1, 1}, x_t)), kv);
    }
    cache.s = kv;
    ++cache.position;
    return output(matmul(q, cache.s), x_t);
  }

 private:
  double key_scale() const { return 1.0 / std::sqrt(double(config_.dim / config_.heads)); }

  // x [B, h, N, d_h] with each channel pair (2j, 2j+1) at position first + t turned by
  // (first + t)·θ_j.
  Tensor rotate(const Tensor& x, int64_t first) const {
    const int64_t b = x.size(0), h = x.size(1), n = x.size(2), dh = x.size(3), pairs = dh / 2;
    std::vector<double> cos_table(static_cast<size_t>(n * pairs)), sin_table(cos_table.size());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        double angle = double(first + t) * std::pow(10000.0, -2.0 * double(j) / double(dh));
        cos_table[t * pairs + j] = std::cos(angle);
        sin_table[t * pairs + j] = std::sin(angle);
      }
    Tensor cos_t = retention_constant(cos_table, {n, pairs, 1}, x);
    Tensor sin_t = retention_constant(sin_table, {n, pairs, 1}, x);
    Tensor p = reshape(x, {b, h, n, pairs, 2});
    Tensor even = narrow(p, 4, 0, 1), odd = narrow(p, 4, 1, 1);
    Tensor turned =
        concat({sub(mul(even, cos_t), mul(odd, sin_t)), add(mul(even, sin_t), mul(odd, cos_t))}, 4);
    return reshape(turned, {b, h, n, dh});
  }

  // D_k [h, N, N]: γ_k^{n−m} below and on the diagonal; above it 0 (causal) or γ_k^{m−n}.
  Tensor decay_matrix(int64_t n, const Tensor& like) const {
    const int64_t h = config_.heads;
    std::vector<double> values(static_cast<size_t>(h * n * n), 0.0);
    for (int64_t head = 0; head < h; ++head)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          if (j <= i || !config_.causal)
            values[(head * n + i) * n + j] =
                std::pow(retention_decay(head), double(i > j ? i - j : j - i));
    return retention_constant(values, {h, n, n}, like);
  }

  // Y = (SiLU(X W_G) ⊙ concat_k LN_k(Ret_k)) W_O from Ret [B, h, N, d_h].
  Tensor output(const Tensor& ret, const Tensor& x) const {
    Tensor o = mixers::merge_heads(layer_norm(ret, Tensor(), Tensor(), kRetentionLnEps));
    o = scale_shift(o, ln->weight, ln->bias);
    Tensor g = w_g->forward(x);
    return w_o->forward(mul(mul(g, sigmoid(g)), o));
  }

  std::shared_ptr<Linear> w_q, w_k, w_v, w_g, w_o;
  std::shared_ptr<LayerNorm> ln;
};

}  // namespace

void register_retnet_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "retnet";
  info.summary =
      "multi-scale retention (Q Kᵀ ⊙ D) V with rotary positions and decays γ_k = 1 − 2^{−5−k}; "
      "recurrent in decoding (Sun et al. 2023)";
  info.capabilities.length = LengthSupport::Any;
  info.build = [](const MixerConfig& c) {
    if ((c.dim / c.heads) % 2 != 0)
      spec_fail(c.name, ": the head width d/h = ", c.dim / c.heads,
                " must be even (rotary positions turn channel pairs); d = ", c.dim,
                ", h = ", c.heads);
    return std::make_shared<Retention>(c);
  };
  info.expected_parameters = [](const MixerConfig& c) { return 5 * c.dim * c.dim + 2 * c.dim; };
  registry.add(std::move(info));
}

}  // namespace mixlab
