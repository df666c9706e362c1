// The Synthesizer family (mixers.md §3, Tay et al. 2020): attention whose logits are synthesized
// instead of (or besides) computed from query-key dot products.
//
//   V = X W_V + b_V                                                    (W_V : d → d, xavier)
//   A_k = softmax(L_k + M)                                             (per head k, L_k ∈ R^{N×N})
//   Y = concat_k(A_k V_k) W_O + b_O                                    (W_O : d → d, xavier)
//
// The synthesized logits are NOT scaled. M is additive: padded keys and, when causal, keys j > i
// are masked; a row whose keys are all masked gets weights exactly 0 (mixers::masked_softmax).
// All members need N ≤ ℓ and slice their ℓ-sized parameters to the first N positions.
//
//   synth-random  (R)   L_k = R_k[:N, :N],  R ∈ R^{h×ℓ×ℓ} trainable, uniform ±√(3/ℓ).
//                       Params hℓ² + 2d² + 2d.
//   synth-fixed   (Fix) as R, but R is a buffer drawn once from the seed (saved in checkpoints,
//                       never trained). Params 2d² + 2d (+ the hℓ² buffer).
//   synth-dense   (D)   P = relu(X W₁ + b₁) (W₁ : d → d), viewed per head as P_k ∈ R^{N×d_h};
//                       L_k = (P_k W₂ + b₂)[:, :N] with W₂ : d_h → ℓ shared by the heads.
//                       Params d² + d + d_hℓ + ℓ + 2d² + 2d.
//   synth-frandom (FR)  L_k = R₁_k[:N] R₂_k[:N]ᵀ, R₁, R₂ ∈ R^{h×ℓ×r}, uniform ±√(3/r), r = --rank
//                       (default 8). Params 2hℓr + 2d² + 2d.
//   synth-fdense  (FD)  A = X W_A + b_A (W_A : d → h·a), B = X W_B + b_B (W_B : d → h·b), a·b = ℓ
//                       (a = --fd-a; "auto", the default, is the divisor of ℓ nearest √ℓ);
//                       L_k[i, u·b + v] = A_k[i,u] · B_k[i,v], then the first N columns.
//                       Params h(a+b)(d+1) + 2d² + 2d.
//   synth-mix:C₁+…+C_M  components from {R, Fix, D, FR, FD, V}: L_k = Σ_c α_c L_k^{(c)},
//                       α = softmax(θ), θ ∈ R^M initialised to 0 (trainable); the V component is
//                       Q_k K_kᵀ/√d_h with its own W_Q, W_K (+ biases, xavier). Params
//                       2d² + 2d + M + Σ_c (R hℓ², Fix 0, D d²+d+d_hℓ+ℓ, FR 2hℓr, FD h(a+b)(d+1),
//                       V 2d²+2d).
//
// Incremental decoding: row i of the logits comes from position i alone (R, Fix, FR: a slice of
// the tables; D, FD: token i; V: q_i against the cached keys), V (and K for a V component) is
// cached, and the new row attends to the cached positions 0..i.
//
// Choices (see the spec's notes on the official code):
// - D does the per-head transpose the paper means (the long-range-arena reshape scrambles
//   heads); its W₂ is applied to the first N output rows only, the same as slicing the columns.
// - FR gives every query its own row (mesh-tensorflow's einsum makes all rows identical).
// - The padding mask is applied in every mode (long-range-arena omits it in pure synthesizer mode).
// - Parameter names: R ("R"), Fix (buffer "R_fix", so R and Fix can sit in one mix), D ("w_1",
//   "w_2"), FR ("R_1", "R_2"), FD ("w_a", "w_b"), V component ("w_q", "w_k"), mix weights
//   ("theta"), then "w_v" and "w_o" (always the last module). Initial values are drawn from
//   Generator(seed) in the order the components are listed, then W_V, W_O.
// - step() attends over every cached position (decoding has no padding), like attention's step;
//   decoding past ℓ positions is an error naming max_len.
// - A mix with a V component trains through the attention core: softmax(Q'Kᵀ + L_rest + M) V
//   with Q', K, V from one stacked product and the other components' logits as the scores' bias
//   (attend_with_dot_products); `mixlab inspect` and decoding take the formula's path.
//
// This file is the skeleton that every member shares (V, W_O, the mixture, the softmax, the
// cache); each L^{(c)} is a component in nn/mixers/synthesizer_logits.cpp.
#include <cmath>
#include <functional>

#include "nn/attention_core.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixers/synthesizer_logits.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

using synthesizer::Component;
using synthesizer::Kind;
using synthesizer::kind_info;
using synthesizer::parse_mix;
using synthesizer::Registrar;

// ---- the common skeleton ----

class Synthesizer : public Mixer {
 public:
  // `kinds` are the components; `mix` adds the trainable mixture weights θ (synth-mix).
  Synthesizer(const MixerConfig& c, std::vector<Kind> kinds, bool mix)
      : Mixer(c), kinds_(std::move(kinds)) {
    Generator gen(c.seed);
    Registrar reg{c, gen,
                  [this](const std::string& n, Tensor t) { return register_parameter(n, t); },
                  [this](const std::string& n, Tensor t) { return register_buffer(n, t); },
                  [this, &gen](const std::string& n, int64_t in, int64_t out) {
                    return register_module(n, std::make_shared<Linear>(in, out, true, gen));
                  }};
    for (Kind k : kinds_) components_.push_back(kind_info(k).make(reg));
    if (mix)
      theta = register_parameter("theta", init::zeros({static_cast<int64_t>(kinds_.size())}));
    for (size_t c = 0; mix && c < kinds_.size(); ++c)
      if (kinds_[c] == Kind::V) {
        dot_products_ = components_[c].get();
        dot_product_index_ = static_cast<int64_t>(c);
      }
    w_v = register_module("w_v", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_o = register_module("w_o", std::make_shared<Linear>(c.dim, c.dim, true, gen));
  }
  std::string type_name() const override {
    return theta.defined() ? "SynthesizerMix" : "Synthesizer";
  }
  std::string extra_repr() const override {
    std::string out;
    for (Kind k : kinds_) {
      if (!out.empty()) out += '+';
      out += kind_info(k).name;
    }
    return "components=" + out;
  }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1), h = config_.heads;
    Tensor mask = mixers::attention_mask(ctx.valid, config_.causal, n, n, x.dtype(), x.device());
    if (dot_products_ && !math_attention()) return attend_with_dot_products(x, mask);
    Tensor v = mixers::split_heads(w_v->forward(x), h);
    Tensor logits = combine(
        [&](const Component& c, const Tensor& alpha) { return c.logits(x, alpha); }, mixture());
    if (theta.defined() && mixing_capture_active()) capture_mixture(x, mask);
    return attend(logits, mask, v);
  }

  // Incremental decoding: V (and a V component's K) are cached; the new row of the logits
  // comes from position i alone.
  struct Cache : MixerCache {
    Tensor v;                    // [B, h, t, d_h]
    std::vector<Tensor> states;  // one per component (the V component's keys)
    std::vector<Tensor*> batch_tensors() override {
      std::vector<Tensor*> out{&v};
      for (Tensor& s : states) out.push_back(&s);
      return out;
    }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override {
    auto cache = std::make_unique<Cache>();
    cache->states.resize(components_.size());
    return cache;
  }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto* cache = &begin_step<Cache>(x_t, base);
    int64_t i = cache->position;
    Tensor v_t = mixers::split_heads(w_v->forward(x_t), config_.heads);
    cache->v = cache->v.defined() ? concat({cache->v, v_t}, 2) : v_t;
    size_t index = 0;
    Tensor logits =
        combine([&](const Component& c,
                    const Tensor& alpha) { return c.row(x_t, i, cache->states[index++], alpha); },
                mixture());
    ++cache->position;
    return attend(logits, Tensor(), cache->v);  // the new row sees every cached position
  }

 private:
  // L = Σ_c α_c L^{(c)} for a mix, the single component's logits otherwise. Each component
  // applies its α_c itself (see Component). The terms that depend on positions only (R, Fix,
  // FR: [1, h, N, N]) are summed while they are small and added to the per-example sum once.
  // `alpha` is mixture()'s; `skip` (if not null) is left out of the sum (an empty sum is
  // undefined).
  //
  // The per-example terms (D, FD) are heads views of [B, N, h, N] buffers. They are summed as
  // [B, N, h, N] (each term transposed back to its buffer's order) and the total is handed on as
  // a heads view again: the adds stream through memory instead of gathering strided rows, the
  // cores read the view in place, and they write its gradient in the same layout, which D's and
  // FD's backward then read without a copy (R+Fix+D+FR+FD+V, 2 threads: the two
  // [B, h, N, N] adds and a [B, N, h, N] copy a layer were 2.6% of the kernel time).
  using MakeLogits = std::function<Tensor(const Component&, const Tensor& alpha)>;
  Tensor combine(const MakeLogits& make, const Tensor& alpha,
                 const Component* skip = nullptr) const {
    if (!alpha.defined()) return make(*components_.front(), Tensor());
    Tensor shared, per_token;  // per_token: the per-example sum as [B, N, h, N]
    for (size_t c = 0; c < components_.size(); ++c) {
      if (components_[c].get() == skip) continue;
      Tensor term = make(*components_[c], narrow(alpha, 0, static_cast<int64_t>(c), 1));
      if (term.size(0) == 1) {
        shared = shared.defined() ? add(shared, term) : term;
      } else {
        Tensor tokens_first = transpose(term, 1, 2);
        per_token = per_token.defined() ? add(per_token, tokens_first) : tokens_first;
      }
    }
    if (!per_token.defined()) return shared;
    if (shared.defined()) per_token = add(per_token, transpose(shared, 1, 2));
    return transpose(per_token, 1, 2);
  }

  // softmax(L + M) V. Per-example weights (D, FD, V, or any logits under a padding mask) run
  // fused per (batch, head): fused_synthesized_attention keeps no [B, h, N, N] probabilities,
  // reads V's heads in place and gives the heads merged. Logits that depend on positions only
  // (R, Fix, FR: [1, h, N, N]) under a mask that does too (none, or causal) give every example
  // the same weights: one softmax, which the product broadcasts over the batch, measured faster
  // than the fused core repeating it per example (2.4 against 2.8 ms per layer and step, the
  // synth-random classifier, 2 threads). `mixlab inspect` records the weights on this path too;
  // both agree within rounding.
  Tensor attend(const Tensor& logits, const Tensor& mask, const Tensor& v) const {
    const bool per_example_mask = mask.defined() && mask.dim() == 4 && mask.size(0) != 1;
    const bool shared = logits.size(0) != v.size(0) && !per_example_mask;
    if (!shared && !math_attention())
      return w_o->forward(mixers::merge_heads(fused_synthesized_attention(logits, v, mask)));
    Tensor a = mixers::masked_softmax(logits, mask);
    capture_mixing(*this, "attention", RowRule::SumToOne, [&] {
      return expand(a, {v.size(0), a.size(1), a.size(2), a.size(3)});
    });
    return w_o->forward(mixers::merge_heads(matmul(a, v)));
  }

  // A mix with a V component: softmax(Q' Kᵀ + L_rest + M) V, where L_rest is the other
  // components' Σ α_c L^{(c)} and Q' = Q·α_V/√d_h. Q', K and V come from one product of the
  // stacked weights [W_Q'; W_K; W_V] and go to the attention core with L_rest as its bias
  // (fused_self_attention): the dot-product logits are never formed as a [B, h, N, N] tensor,
  // the core reads the three projections in place, and their gradient comes back as one buffer,
  // so the backward is one input-gradient product instead of three and two adds. The same
  // numbers as the formula's path (forward's other branch, which `mixlab inspect` takes) up to
  // rounding.
  Tensor attend_with_dot_products(const Tensor& x, const Tensor& mask) const {
    const Tensor alpha = mixture();
    Tensor rest = combine([&](const Component& c, const Tensor& a) { return c.logits(x, a); },
                          alpha, dot_products_);
    std::vector<Tensor> qk = synthesizer::dot_product_projections(
        *dot_products_, narrow(alpha, 0, dot_product_index_, 1));
    return w_o->forward(mixers::packed_self_attention(
        x, {qk[0], qk[2], w_v->weight}, {qk[1], qk[3], w_v->bias}, config_.heads, mask, 1.0, rest));
  }

  // The mixture weights α = softmax(θ) (undefined for a single component).
  Tensor mixture() const { return theta.defined() ? softmax(theta, 0) : Tensor(); }

  // For `mixlab inspect`: each component's own attention softmax(L_c + M) and the weights α.
  void capture_mixture(const Tensor& x, const Tensor& mask) const {
    for (size_t c = 0; c < components_.size(); ++c)
      capture_mixing(*this, std::string("component ") + kind_info(kinds_[c]).name,
                     RowRule::SumToOne,
                     [&] { return mixers::masked_softmax(components_[c]->logits(x), mask); });
    capture_mixing(
        *this, "mixture weights softmax(θ)", RowRule::SumToOne,
        [&] {
          return reshape(mixture(), {1, theta.size(0)});
        },
        "mixture", "component");
  }

  std::vector<Kind> kinds_;
  std::vector<std::unique_ptr<Component>> components_;
  const Component* dot_products_ = nullptr;  // a mix's V component, if it has one
  int64_t dot_product_index_ = 0;            // its place in the mix (its α)
  Tensor theta;
  std::shared_ptr<Linear> w_v, w_o;
};

MixerCapabilities synthesizer_capabilities() {
  MixerCapabilities caps;
  caps.length = LengthSupport::UpToMaxLen;
  caps.padding_property = true;
  caps.exact_length_equivalence = true;
  caps.causal = true;
  return caps;
}

int64_t skeleton_parameters(const MixerConfig& c) { return 2 * c.dim * c.dim + 2 * c.dim; }

}  // namespace

void register_synthesizer_mixers(MixerRegistry& registry) {
  const MixerOption rank =
      MixerOption::integer("rank", "8", "FR rank r of R₁, R₂ ∈ R^{h×ℓ×r}", 1, kMaxOptionSize);
  const MixerOption fda = MixerOption::integer(
      "fd-a", "auto", "FD factor a with a·b = ℓ (default: the divisor of ℓ nearest √ℓ)", 1,
      kMaxOptionSize,
      [](int64_t a, const MixerConfig& c) -> std::string {
        if (c.max_len % a == 0) return "";
        return "fd-a must be a positive divisor of max_len ℓ = " + std::to_string(c.max_len) +
               " (a·b = ℓ)";
      },
      {"auto", ""});
  struct Single {
    const char* name;
    Kind kind;
    const char* summary;
    std::vector<MixerOption> options;
  };
  const std::vector<Single> singles = {
      {"synth-random",
       Kind::R,
       "random synthesizer: trainable logits R_k[:N,:N] (Tay et al. 2020)",
       {}},
      {"synth-fixed",
       Kind::Fix,
       "fixed random synthesizer: logits from a frozen random buffer R_k[:N,:N]",
       {}},
      {"synth-dense",
       Kind::D,
       "dense synthesizer: logits relu(X W₁ + b₁)_k W₂ + b₂ from each token",
       {}},
      {"synth-frandom",
       Kind::FR,
       "factorized random synthesizer: logits R₁_k R₂_kᵀ of rank r",
       {rank}},
      {"synth-fdense",
       Kind::FD,
       "factorized dense synthesizer: logits A_k[i,u]·B_k[i,v] at column u·b+v",
       {fda}},
  };
  for (const auto& s : singles) {
    MixerInfo info;
    info.name = s.name;
    info.summary = s.summary;
    info.capabilities = synthesizer_capabilities();
    info.options = s.options;
    Kind kind = s.kind;
    info.build = [kind](const MixerConfig& c) {
      return std::make_shared<Synthesizer>(c, std::vector<Kind>{kind}, false);
    };
    info.expected_parameters = [kind](const MixerConfig& c) {
      return kind_info(kind).parameters(c) + skeleton_parameters(c);
    };
    registry.add(std::move(info));
  }

  MixerInfo mix;
  mix.name = "synth-mix";
  mix.is_family = true;
  mix.summary =
      "synthesizer mixture synth-mix:C1+...+CM of R, Fix, D, FR, FD, V logits with weights "
      "softmax(θ)";
  mix.capabilities = synthesizer_capabilities();
  mix.options = {rank, fda};
  mix.check_member = [](const std::string& name) { parse_mix(name); };
  mix.build = [](const MixerConfig& c) {
    return std::make_shared<Synthesizer>(c, parse_mix(c.name), true);
  };
  mix.expected_parameters = [](const MixerConfig& c) {
    auto kinds = parse_mix(c.name);
    int64_t total = skeleton_parameters(c) + static_cast<int64_t>(kinds.size());
    for (Kind k : kinds) total += kind_info(k).parameters(c);
    return total;
  };
  mix.test_names = {"synth-mix:R+V", "synth-mix:D+V", "synth-mix:R+Fix+D+FR+FD+V"};
  registry.add(std::move(mix));
}

}  // namespace mixlab
