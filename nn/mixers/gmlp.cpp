// gmlp and amlp: the gated MLP unit with a spatial gating unit (Liu et al. 2021, "Pay attention
// to MLPs"; mixers.md §9). The unit replaces the whole block (capabilities.block = Unit: the
// block computes x + Drop(Unit(LN(x))) and has no FFN), so this mixer IS the unit.
//
//   Z = GELU(X U + b_U)                       (U : d → f, f = 4d by default)
//   Z₁, Z₂ = Z[:, :f/2], Z[:, f/2:]
//   G = W LN(Z₂) + b                          (LN over the f/2 channels, gain and bias, eps 1e-5;
//                                              W ∈ R^{ℓ×ℓ} mixes tokens, b ∈ R^ℓ: b[i] is added
//                                              to row i)
//   amlp: G ← G + softmax(q kᵀ/√d_a + M) v W_o + b_o,  q, k, v = X W_q, X W_k, X W_v
//                                             (d → d_a, no bias; W_o : d_a → f/2 with bias)
//   Unit = (G ⊙ Z₁) V + b_V                   (V : f/2 → d)
//
// Init: W uniform ±1e-3/ℓ and b = 1, so G ≈ 1 and the unit starts as a plain FFN
// (Z₁ V + b_V); every Linear is xavier with zero bias (U, V, and amlp's W_q, W_k, W_v, W_o).
// N ≤ ℓ uses W[:N, :N] and b[:N]. Padding: the columns of W at invalid positions are zeroed
// (done by zeroing LN(Z₂)'s invalid rows, the same product) and M masks invalid keys, so the
// padding property and exact length equivalence hold. Causal: exact with W ← W ⊙ tril and M
// masking keys j > i. A query whose keys are all masked gets attention weights 0 (its attention
// term is b_o).
//
// Options: "hidden" = f (0 means 4d, the same convention as the block's FFN width; must be
// even; absent, the block's FFN width), amlp's "attn-dim" = d_a (default 64).
// Params (gmlp) d·f + f + f + ℓ² + ℓ + (f/2)·d + d: U (d·f + f), the LN's gain and bias
// (f/2 + f/2 = f), W (ℓ²), b (ℓ), V ((f/2)·d + d); amlp adds 3·d·d_a + d_a·f/2 + f/2. This
// agrees with the definition above term by term.
// Parameters: U.weight [f, d], U.bias [f], ln.weight [f/2], ln.bias [f/2], W [ℓ, ℓ], b [ℓ],
// V.weight [d, f/2], V.bias [d]; amlp adds w_q.weight, w_k.weight, w_v.weight [d_a, d],
// w_o.weight [f/2, d_a], w_o.bias [f/2].
// Incremental decoding caches the LN(Z₂) rows (and amlp's k, v); each step computes its own
// row of Z, G and the unit.
#include <cmath>

#include "core/random.h"
#include "nn/attention_core.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr double kLnEps = 1e-5;

// The unit replaces the FFN, so without a "hidden" option it takes the block's FFN width.
// (The registry checks a given option; the block's width is checked here.)
int64_t hidden_width(const MixerConfig& c) {
  int64_t f = c.get_int("hidden", c.block_ffn_dim);
  if (f == 0) return 4 * c.dim;
  if (f % 2 != 0)
    spec_fail(c.name, ": the unit's width f = ", f,
              " (the block's FFN width, as no hidden option is given) must be even: it is split "
              "in halves");
  return f;
}

int64_t attn_dim(const MixerConfig& c) { return c.get_int("attn-dim", 64); }

class GatedMlp : public Mixer {
 public:
  GatedMlp(const MixerConfig& c, bool tiny_attention) : Mixer(c), attention_(tiny_attention) {
    Generator gen(c.seed);
    int64_t d = c.dim, f = hidden_width(c), l = c.max_len;
    U = register_module("U", std::make_shared<Linear>(d, f, true, gen));
    ln = register_module("ln", std::make_shared<LayerNorm>(f / 2, kLnEps));
    W = register_parameter("W", init::uniform({l, l}, 1e-3 / static_cast<double>(l), gen));
    b = register_parameter("b", init::ones({l}));
    V = register_module("V", std::make_shared<Linear>(f / 2, d, true, gen));
    if (attention_) {
      int64_t da = attn_dim(c);
      w_q = register_module("w_q", std::make_shared<Linear>(d, da, false, gen));
      w_k = register_module("w_k", std::make_shared<Linear>(d, da, false, gen));
      w_v = register_module("w_v", std::make_shared<Linear>(d, da, false, gen));
      w_o = register_module("w_o", std::make_shared<Linear>(da, f / 2, true, gen));
    }
  }
  std::string type_name() const override { return attention_ ? "AMlpUnit" : "GMlpUnit"; }
  std::string extra_repr() const override {
    std::string s = "hidden=" + std::to_string(U->out_features) +
                    ", max_len=" + std::to_string(config_.max_len);
    if (attention_) s += ", attn_dim=" + std::to_string(w_q->out_features);
    return s;
  }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1);
    Tensor z1, zn;
    project(x, z1, zn);
    Tensor w = narrow(narrow(W, 0, 0, n), 1, 0, n);
    if (config_.causal) w = mul(w, tril_mask(n, n, 0, x.dtype(), x.device()));
    capture_mixing(*this, "spatial gating weights W", RowRule::Free, [&] { return w; });
    Tensor g = matmul(w, mixers::zero_invalid_rows(zn, ctx.valid));  // [N,N]·[B,N,f/2]
    if (attention_) {
      Tensor mask = mixers::attention_mask(ctx.valid, config_.causal, n, n, x.dtype(), x.device());
      g = add(g, math_attention() ? attend(x, mask) : attend_packed(x, mask));
    }
    // Z₁ ⊙ (G + b), b per token, in one kernel each way (spatial_gate).
    return V->forward(spatial_gate(g, narrow(b, 0, 0, n), z1));
  }

  // On the real tokens' rows (nn/token_rows.h): U, V and amlp's projections, the unit's products,
  // run on the R rows, and aMLP's attention core on the rows' groups of equal-length sequences;
  // only W's product and the gate see the padded layout (LN(Z₂) is zero at the padding there, as
  // zero_invalid_rows makes it in forward()).
  Tensor forward_rows(const Tensor& x, const MixerContext& ctx) override {
    // A recorder (W and the attention) or aMLP's Math core: forward()'s path.
    if (mixing_capture_active() || (attention_ && math_attention()))
      return Mixer::forward_rows(x, ctx);
    check_rows(x, ctx);
    const TokenRows& rows = ctx.rows;
    int64_t n = rows.length;
    Tensor z1, zn;
    project(x, z1, zn);
    Tensor w = narrow(narrow(W, 0, 0, n), 1, 0, n);
    if (config_.causal) w = mul(w, tril_mask(n, n, 0, x.dtype(), x.device()));
    Tensor g = matmul(w, unpack_rows(zn, rows));
    if (attention_) {
      Tensor heads =
          mixers::packed_self_attention_rows(x, rows, *w_q, *w_k, *w_v, 1, config_.causal, scale());
      g = add(g, unpack_rows(w_o->forward(heads), rows));
    }
    return V->forward(pack_rows(spatial_gate(g, narrow(b, 0, 0, n), unpack_rows(z1, rows)), rows));
  }

  struct Cache : MixerCache {
    Tensor zn;    // [B, t, f/2]: LN(Z₂) rows so far
    Tensor k, v;  // amlp: [B, 1, t, d_a] (undefined for gmlp)
    std::vector<Tensor*> batch_tensors() override { return {&zn, &k, &v}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    int64_t t = cache.position;
    Tensor z1, zn;
    project(x_t, z1, zn);
    cache.zn = cache.zn.defined() ? concat({cache.zn, zn}, 1) : zn;
    ++cache.position;
    Tensor w_row = narrow(narrow(W, 0, t, 1), 1, 0, t + 1);  // W[t, :t+1] (tril keeps it all)
    Tensor g = matmul(w_row, cache.zn);                      // [B, 1, f/2], b added below
    if (attention_) {
      Tensor q = mixers::split_heads(w_q->forward(x_t), 1);
      Tensor k = mixers::split_heads(w_k->forward(x_t), 1);
      Tensor v = mixers::split_heads(w_v->forward(x_t), 1);
      cache.k = cache.k.defined() ? concat({cache.k, k}, 2) : k;
      cache.v = cache.v.defined() ? concat({cache.v, v}, 2) : v;
      g = add(g, attend(q, cache.k, cache.v, Tensor()));  // the new query sees every cached key
    }
    return V->forward(spatial_gate(g, narrow(b, 0, t, 1), z1));
  }

 private:
  // Z₁ and LN(Z₂) of x [B, N, d].
  // Each half of Z = GELU(X U + c) comes from its own rows of U: two contiguous products instead
  // of one whose halves are strided views (LayerNorm would copy Z₂, and the two halves'
  // gradients would each be widened to Z's width and summed). The GELU is in the products' bias
  // pass (linear_gelu).
  void project(const Tensor& x, Tensor& z1, Tensor& zn) const {
    int64_t half = U->out_features / 2;
    auto z_half = [&](int64_t first) {
      return linear_gelu(x, narrow(U->weight, 0, first, half), narrow(U->bias, 0, first, half));
    };
    z1 = z_half(0);
    zn = ln->forward(z_half(half));
  }

  // The tiny single-head attention's contribution to G: softmax(q kᵀ/√d_a + M) v W_o + b_o.
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) const {
    Tensor y = mixers::attend(q, k, v, mask, scale(), [&](const Tensor& a) {
      capture_mixing(*this, "tiny attention", RowRule::SumToOne, [&] { return a; });
    });
    return w_o->forward(mixers::merge_heads(y));
  }
  Tensor attend(const Tensor& x, const Tensor& mask) const {
    return attend(mixers::split_heads(w_q->forward(x), 1),  // one head: [B, 1, N, d_a]
                  mixers::split_heads(w_k->forward(x), 1), mixers::split_heads(w_v->forward(x), 1),
                  mask);
  }
  // The same with q, k and v from one product (mixers::packed_self_attention).
  Tensor attend_packed(const Tensor& x, const Tensor& mask) const {
    return w_o->forward(mixers::packed_self_attention(x, *w_q, *w_k, *w_v, 1, mask, scale()));
  }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(w_q->out_features)); }

  bool attention_;
  std::shared_ptr<Linear> U, V, w_q, w_k, w_v, w_o;
  std::shared_ptr<LayerNorm> ln;
  Tensor W, b;
};

int64_t gmlp_parameters(const MixerConfig& c) {
  int64_t d = c.dim, f = hidden_width(c), l = c.max_len;
  return d * f + f + f + l * l + l + (f / 2) * d + d;
}

}  // namespace

void register_gmlp_mixers(MixerRegistry& registry) {
  MixerOption hidden = MixerOption::integer(
      "hidden", "0",
      "width f of the unit's projection U : d → f, split in two halves of "
      "f/2 (0 means 4d; must be even)",
      0, kMaxOptionSize, [](int64_t f, const MixerConfig&) -> std::string {
        return f % 2 == 0 ? "" : "the width f must be even (it is split in halves)";
      });
  MixerInfo g;
  g.name = "gmlp";
  g.summary =
      "gated MLP unit (GELU(X U) halves Z₁, Z₂; (W·LN(Z₂) + b) ⊙ Z₁) V, replaces the block "
      "(Liu et al. 2021)";
  g.capabilities.length = LengthSupport::UpToMaxLen;
  g.capabilities.block = BlockStyle::Unit;
  g.options = {hidden};
  g.build = [](const MixerConfig& c) { return std::make_shared<GatedMlp>(c, false); };
  g.expected_parameters = gmlp_parameters;
  registry.add(g);

  MixerInfo a = g;
  a.name = "amlp";
  a.summary = "gMLP unit with a tiny single-head attention added to its gate (Liu et al. 2021)";
  a.options = {
      hidden, MixerOption::integer("attn-dim", "64", "width d_a of the tiny attention's q, k, v", 1,
                                   kMaxOptionSize)};
  a.build = [](const MixerConfig& c) { return std::make_shared<GatedMlp>(c, true); };
  a.expected_parameters = [](const MixerConfig& c) {
    int64_t d = c.dim, f = hidden_width(c), da = attn_dim(c);
    return gmlp_parameters(c) + 3 * d * da + da * (f / 2) + f / 2;
  };
  a.test_names = {};
  registry.add(std::move(a));
}

}  // namespace mixlab
