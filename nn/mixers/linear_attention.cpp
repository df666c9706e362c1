// linear-attention: attention through a kernel feature map (mixers.md §15; Katharopoulos et al.
// 2020, "Transformers are RNNs").
//
//   Q = X W_Q + b_Q,  K = X W_K + b_K,  V = X W_V + b_V             (W_* : d → d, h heads)
//   φ(x) = elu(x) + 1                          (x + 1 for x > 0, eˣ otherwise: always positive)
//   non-causal:  S_k = φ(K_k)ᵀ V_k,  z_k = Σ_j φ(K_k)_j
//   causal:      S_k(i) = Σ_{j≤i} φ(K_k)_jᵀ V_k[j],  z_k(i) = Σ_{j≤i} φ(K_k)_j   (prefix sums)
//   O_k[i] = φ(Q_k)_i S_k / (φ(Q_k)_i · z_k + ε),   ε = 1e-6
//   Y = concat_k(O_k) W_O + b_O
//
// Padded keys contribute nothing: the rows of φ(K) and V at invalid positions are set to 0, so a
// query with no valid key gets O = 0 and the output row b_O (§0's rule for softmax mixers).
// Params 4d² + 4d; xavier weights, zero biases. Any length; padding, exact length equivalence and
// causality exact. Incremental decoding keeps S_k and z_k: each step costs O(d_h²) per head, at
// any position (the RNN of the paper's title).
// Parameter names: w_q, w_k, w_v, w_o (Linear layers: .weight [d, d], .bias), as attention's.
#include "core/random.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr double kEpsilon = 1e-6;

// φ(x) = elu(x) + 1 = relu(x) + exp(−relu(−x)): x + 1 above 0, eˣ below. One unary op, whose
// formula never takes the exp of a large positive number (so neither the value nor the gradient
// can overflow).
Tensor feature_map(const Tensor& x) { return elu_plus_one(x); }

// Inclusive prefix sum along `axis` by doubling shifts (Hillis-Steele): after the step with
// shift s, each position holds the sum of the 2s positions ending at it. log₂N additions of
// existing ops, so autograd differentiates it (the gradient is the suffix sum).
Tensor prefix_sum(const Tensor& x, int64_t axis) {
  Tensor sum = x;
  int64_t n = x.size(axis);
  for (int64_t shift = 1; shift < n; shift *= 2) {
    Tensor earlier = narrow(sum, axis, 0, n - shift);
    Shape zeros_shape = x.shape();
    zeros_shape[axis] = shift;
    Tensor shifted = concat({Tensor::zeros(zeros_shape, x.dtype(), x.device()), earlier}, axis);
    sum = add(sum, shifted);
  }
  return sum;
}

class LinearAttention : public Mixer {
 public:
  explicit LinearAttention(const MixerConfig& c) : Mixer(c) {
    Generator gen(c.seed);
    w_q = register_module("w_q", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_k = register_module("w_k", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_v = register_module("w_v", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_o = register_module("w_o", std::make_shared<Linear>(c.dim, c.dim, true, gen));
  }
  std::string type_name() const override { return "LinearAttention"; }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t h = config_.heads;
    Tensor phi_q = mixers::split_heads(feature_map(w_q->forward(x)), h);  // [B, h, N, d_h]
    Tensor phi_k =
        mixers::split_heads(mixers::zero_invalid_rows(feature_map(w_k->forward(x)), ctx.valid), h);
    Tensor v = mixers::split_heads(mixers::zero_invalid_rows(w_v->forward(x), ctx.valid), h);
    // The matrix this layer applies, φ(Q)_i·φ(K)_j / Σ_j' φ(Q)_i·φ(K)_j' over the allowed keys,
    // for inspect (ε is left out of the denominator so that rows sum to exactly 1).
    capture_mixing(*this, "linear attention φ(Q)φ(K)ᵀ, rows normalised", RowRule::SumToOne, [&] {
      Tensor scores = matmul(phi_q, transpose(phi_k, 2, 3));  // [B, h, N, N], ≥ 0
      Tensor causal = mixers::attention_mask(Tensor(), config_.causal, x.shape()[1], x.shape()[1],
                                             scores.dtype(), scores.device());
      if (causal.defined()) scores = mul(scores, causal);
      return div(scores, sum(scores, {3}, true));
    });
    Tensor o;
    if (config_.causal) {
      // S(i) = Σ_{j≤i} φ(K)_jᵀ V_j: the outer product at every position, then prefix sums.
      Tensor s = prefix_sum(mul(unsqueeze(phi_k, 4), unsqueeze(v, 3)), 2);  // [B, h, N, d_h, d_h]
      Tensor z = prefix_sum(phi_k, 2);                                      // [B, h, N, d_h]
      Tensor numerator = squeeze(matmul(unsqueeze(phi_q, 3), s), 3);        // φ(Q)_i S(i)
      Tensor denominator = sum(mul(phi_q, z), {3}, true);                   // φ(Q)_i · z(i)
      o = div(numerator, add(denominator, kEpsilon));
    } else {
      // φ(Q)_i (φ(K)ᵀ V) / (φ(Q)_i · Σ_j φ(K)_j + ε), one kernel each way per (batch, head). As
      // the composition div(matmul(phi_q, matmul(φ(K)ᵀ, v)), add(matmul(phi_q, Σ_j φ(K)_jᵀ), ε))
      // it ran as batched products and broadcast passes: 16% of the classifier's kernel time.
      o = fused_linear_attention(phi_q, phi_k, v, kEpsilon);
    }
    return w_o->forward(mixers::merge_heads(o));
  }

  // Incremental decoding: the running sums S and z are the whole state.
  struct Cache : MixerCache {
    Tensor s, z;  // [B, h, d_h, d_h], [B, h, 1, d_h]
    std::vector<Tensor*> batch_tensors() override { return {&s, &z}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);  // checks the cache, causality and shape
    int64_t h = config_.heads;
    Tensor phi_q = mixers::split_heads(feature_map(w_q->forward(x_t)), h);  // [B, h, 1, d_h]
    Tensor phi_k = mixers::split_heads(feature_map(w_k->forward(x_t)), h);
    Tensor v = mixers::split_heads(w_v->forward(x_t), h);
    Tensor s_t = matmul(transpose(phi_k, 2, 3), v);  // φ(K)_tᵀ V_t
    cache.s = cache.s.defined() ? add(cache.s, s_t) : s_t;
    cache.z = cache.z.defined() ? add(cache.z, phi_k) : phi_k;
    ++cache.position;
    Tensor denominator = sum(mul(phi_q, cache.z), {3}, true);
    Tensor o = div(matmul(phi_q, cache.s), add(denominator, kEpsilon));
    return w_o->forward(mixers::merge_heads(o));
  }

 private:
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
};

}  // namespace

void register_linear_attention_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "linear-attention";
  info.summary =
      "linear attention φ(Q)(φ(K)ᵀV) / φ(Q)Σφ(K), φ = elu+1; causal by prefix sums "
      "(Katharopoulos et al. 2020)";
  info.capabilities.length = LengthSupport::Any;
  info.build = [](const MixerConfig& c) { return std::make_shared<LinearAttention>(c); };
  info.expected_parameters = [](const MixerConfig& c) { return 4 * c.dim * c.dim + 4 * c.dim; };
  registry.add(std::move(info));
}

}  // namespace mixlab
