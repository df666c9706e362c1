// attention: multi-head dot-product attention (mixers.md §2).
//
//   Q = X W_Q + b_Q,  K = X_kv W_K + b_K,  V = X_kv W_V + b_V        (W_* : d → d)
//   A_k = softmax(Q_k K_kᵀ / √d_h + M)                                (per head k)
//   Y = concat_k(A_k V_k) W_O + b_O
//
// Self-attention has X_kv = X; cross-attention takes X_kv from the memory and masks invalid
// memory positions. M masks padded keys and, when causal, keys j > i. Params 4d² + 4d.
// With `rel-bias=W` (self-attention only) the scores gain a learned relative position bias,
//   A_k = softmax(Q_k K_kᵀ / √d_h + B_k + M),  B_k[i, j] = T[offset(i, j), k]
// (nn/mixers/relative_bias.h: tokens on rows of W, one entry per 2-D offset and head).
// With `lsa=true` (self-attention only), Locality Self-Attention: a learned temperature τ
// (one scalar, √d_h at first) in place of √d_h, and each query's own key masked,
//   A_k = softmax(Q_k K_kᵀ / τ + M_self + M),  M_self[i, i] = −∞,
// applied as the gain √d_h/τ on W_Q and b_Q, so that the fused core's fixed 1/√d_h gives 1/τ.
// Any length; padding and causality exact; incremental decoding caches K and V.
// The core, from the scores to the weighted sum, runs fused per (batch, head) (mixers::attend,
// fused_attention); under `mixlab inspect` (to record A_k) or with the Math core chosen
// (nn/attention_core.h) it takes the equation's unfused path. Self-attention
// projects Q, K and V in one product, X [W_Q; W_K; W_V]ᵀ, read in place by the core
// (fused_self_attention): one product each way in the backward instead of three, and no sum of
// three input gradients. The parameters stay the four Linear layers.
#include <cmath>

#include "core/random.h"
#include "nn/attention_core.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixers/relative_bias.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

class Attention : public Mixer {
 public:
  explicit Attention(const MixerConfig& c) : Mixer(c) {
    Generator gen(c.seed);
    w_q = register_module("w_q", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_k = register_module("w_k", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_v = register_module("w_v", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_o = register_module("w_o", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    if (int64_t width = c.get_int("rel-bias", 0); width > 0)
      rel_bias = register_module("rel_bias",
                                 std::make_shared<RelativePositionBias>(c.heads, c.max_len, width));
    if (c.get_bool("lsa", false))
      temperature = register_parameter("temperature", init::constant({1}, 1.0 / scale()));
  }
  std::string type_name() const override { return config_.cross ? "CrossAttention" : "Attention"; }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    const Tensor& kv = config_.cross ? ctx.memory : x;
    const Tensor& kv_valid = config_.cross ? ctx.memory_valid : ctx.valid;
    int64_t h = config_.heads;
    Tensor mask = mixers::attention_mask(kv_valid, config_.causal, x.size(1), kv.size(1), x.dtype(),
                                         x.device());
    if (temperature.defined()) mask = without_own_key(mask, x);
    Tensor bias = rel_bias ? rel_bias->bias(0, x.size(1), x.size(1)) : Tensor();
    if (!config_.cross && !math_attention()) {
      Tensor gain = query_gain();
      Tensor w = gain.defined() ? mul(w_q->weight, gain) : w_q->weight;
      Tensor b = gain.defined() ? mul(w_q->bias, gain) : w_q->bias;
      return w_o->forward(mixers::packed_self_attention(
          x, {w, w_k->weight, w_v->weight}, {b, w_k->bias, w_v->bias}, h, mask, scale(), bias));
    }
    Tensor q = mixers::split_heads(scaled_query(w_q->forward(x)), h);
    Tensor k = mixers::split_heads(w_k->forward(kv), h);
    Tensor v = mixers::split_heads(w_v->forward(kv), h);
    return attend(q, k, v, mask, bias);
  }

  // On the real tokens' rows (nn/token_rows.h): every projection runs on the R rows (the
  // memory's too, when the encoder packed it). Self-attention's core runs on the rows' groups of
  // equal-length sequences, no padding anywhere; cross-attention's on runs of sequences with
  // equal (query, memory) lengths when the memory was packed too (the decoder packs its rows in
  // the memory's order), else it places the queries beside the padded memory.
  Tensor forward_rows(const Tensor& x, const MixerContext& ctx) override {
    // attend()'s equation path; the relative bias and LSA's mask on the padded layout, where
    // positions are plain
    if (math_attention() || rel_bias || temperature.defined()) return Mixer::forward_rows(x, ctx);
    check_rows(x, ctx);
    const TokenRows& rows = ctx.rows;
    int64_t h = config_.heads, n = rows.length;
    if (!config_.cross) {
      return w_o->forward(mixers::packed_self_attention_rows(x, rows, *w_q, *w_k, *w_v, h,
                                                             config_.causal, scale()));
    }
    // Queries and memory on rows in one sequence order: the core on their groups, no padding.
    std::vector<CrossGroup> groups = cross_groups(rows, ctx.memory_rows);
    if (!groups.empty() && ctx.memory_packed.defined())
      return w_o->forward(fused_attention_groups(w_q->forward(x), w_k->forward(ctx.memory_packed),
                                                 w_v->forward(ctx.memory_packed), h, groups,
                                                 scale()));
    // Otherwise (the memory not packed) the padded memory, queries placed beside it.
    Tensor k = mixers::split_heads(w_k->forward(ctx.memory), h);
    Tensor v = mixers::split_heads(w_v->forward(ctx.memory), h);
    Tensor mask =
        mixers::attention_mask(ctx.memory_valid, false, n, k.size(2), x.dtype(), x.device());
    Tensor q = mixers::split_heads(unpack_rows(w_q->forward(x), rows), h);
    Tensor y = fused_attention(q, k, v, mask, scale());
    return w_o->forward(pack_rows(mixers::merge_heads(y), rows));
  }

  // Incremental decoding: K and V of earlier positions are kept, only the new row is projected.
  struct Cache : MixerCache {
    Tensor k, v;  // [B, h, t, d_h]
    std::vector<Tensor*> batch_tensors() override { return {&k, &v}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext& ctx) override {
    auto& cache = begin_step<Cache>(x_t, base);
    int64_t h = config_.heads;
    Tensor q = mixers::split_heads(w_q->forward(x_t), h);  // never LSA: it refuses causal use
    Tensor mask;
    if (config_.cross) {
      if (!cache.k.defined()) {  // the memory does not change while decoding
        cache.k = mixers::split_heads(w_k->forward(ctx.memory), h);
        cache.v = mixers::split_heads(w_v->forward(ctx.memory), h);
      }
      mask = mixers::key_mask(ctx.memory_valid);
    } else {
      Tensor k = mixers::split_heads(w_k->forward(x_t), h);
      Tensor v = mixers::split_heads(w_v->forward(x_t), h);
      cache.k = cache.k.defined() ? concat({cache.k, k}, 2) : k;
      cache.v = cache.v.defined() ? concat({cache.v, v}, 2) : v;
    }
    int64_t i = cache.position++;
    Tensor bias = rel_bias ? rel_bias->bias(i, 1, cache.k.size(2)) : Tensor();
    return attend(q, cache.k, cache.v, mask, bias);  // the new query sees every cached key
  }

 private:
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                const Tensor& bias = Tensor()) const {
    Tensor y = mixers::attend(
        q, k, v, mask, scale(),
        [&](const Tensor& a) {
          capture_mixing(*this, config_.cross ? "cross-attention" : "attention", RowRule::SumToOne,
                         [&] { return a; });
        },
        bias);
    return w_o->forward(mixers::merge_heads(y));
  }

  double scale() const { return 1.0 / std::sqrt(static_cast<double>(config_.dim / config_.heads)); }

  // LSA's √d_h/τ, which turns the core's 1/√d_h into 1/τ (undefined without LSA).
  Tensor query_gain() const {
    return temperature.defined() ? mul(pow(temperature, -1.0), 1.0 / scale()) : Tensor();
  }
  Tensor scaled_query(const Tensor& q) const {
    return temperature.defined() ? mul(q, query_gain()) : q;
  }
  // LSA's M_self: `allowed` ([B, 1, 1|N, N] or undefined) without each query's own key, for
  // self-attention on x [B, N, d].
  static Tensor without_own_key(const Tensor& allowed, const Tensor& x) {
    const int64_t n = x.size(1);
    std::vector<double> v(static_cast<size_t>(n * n), 1.0);
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i * n + i)] = 0.0;
    Tensor own = Tensor::from_data(v, {n, n}).to(x.dtype()).to(x.device());
    return allowed.defined() ? mul(allowed, own) : own;
  }

  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
  std::shared_ptr<RelativePositionBias> rel_bias;  // null without rel-bias
  Tensor temperature;                              // LSA's τ [1]; undefined without lsa
};

}  // namespace

void register_attention_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "attention";
  info.summary = "multi-head dot-product attention softmax(QKᵀ/√d_h)V (Vaswani et al. 2017)";
  info.capabilities.length = LengthSupport::Any;
  info.capabilities.cross = true;
  info.options = {
      MixerOption::integer(
          "rel-bias", "0",
          "a learned relative position bias per head on the scores, for tokens in rows of W "
          "(raster order; 1: a plain sequence, 7: an image's 7x7 tokens); 0: none",
          0, kMaxOptionSize,
          [](int64_t width, const MixerConfig& c) -> std::string {
            if (width > c.max_len) return "the row width W must be at most the maximum length";
            return "";
          }),
      MixerOption::boolean(
          "lsa", "false",
          "Locality Self-Attention (Lee et al. 2021): a learned temperature in place "
          "of √d_h, and each query's own key masked; self-attention only")};
  // Both options are for self-attention: they refuse cross use here, with their reason, and lsa
  // refuses causal use too.
  info.adjust_capabilities = [](const MixerConfig& c, MixerCapabilities& caps) {
    if (c.get_int("rel-bias", 0) > 0) {
      caps.cross = false;
      caps.cross_refusal =
          "rel-bias biases each score by the offset j - i, and cross-attention's keys (the "
          "encoder's positions) have no offset to the query (rel-bias is for self-attention).";
    }
    if (!c.get_bool("lsa", false)) return;
    caps.cross = false;
    caps.cross_refusal =
        "lsa masks each query's own key, and cross-attention's keys (the encoder's positions) "
        "hold no own key (Locality Self-Attention is for self-attention).";
    caps.causal = false;
    caps.causal_refusal =
        "with lsa each query's own key is masked, so a decoder's first position would see no "
        "key at all (Locality Self-Attention is for encoders).";
  };
  info.build = [](const MixerConfig& c) { return std::make_shared<Attention>(c); };
  info.expected_parameters = [](const MixerConfig& c) {
    int64_t width = c.get_int("rel-bias", 0);
    int64_t bias = width > 0 ? c.heads * RelativePositionBias::offsets(c.max_len, width) : 0;
    int64_t temperature = c.get_bool("lsa", false) ? 1 : 0;
    return 4 * c.dim * c.dim + 4 * c.dim + bias + temperature;
  };
  // A sequence's offsets, and tokens on rows of 3 (the shared tests' ℓ = 8: three rows).
  info.test_options = {{{"rel-bias", "1"}}, {{"rel-bias", "3"}}, {{"lsa", "true"}}};
  registry.add(std::move(info));
}

}  // namespace mixlab
