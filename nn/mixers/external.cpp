// external: external attention with two shared memories (mixers.md §7; Guo et al. 2021).
//
//   X' = X W_t + b_t                                  (W_t : d → e·d, expansion e = 1 by default)
//   split X' into e·h heads X'_k of width d_h; memories shared by all heads:
//   Ã_k = X'_k M_k                                    (M_k : d_h → S, with bias; S = 64 slots)
//   Â_k = softmax over the TOKENS (axis N, invalid tokens get weight exactly 0)
//   A_k[i,s] = Â_k[i,s] / (1e-9 + Σ_s' Â_k[i,s'])    (double normalisation)
//   O_k = A_k M_v                                     (M_v : S → d_h, with bias)
//   Y = concat_k(O_k) W_p + b_p                       (W_p : e·d → d)
//
// Init: every weight truncated normal std 0.02 (cut at ±2 std), biases 0.
// Params 2e·d² + (e+1)d + 2d_hS + S + d_h. Any length; padding exact (masked token softmax).
//
// Causal (a mixlab extension, not in the paper): the token softmax becomes a prefix softmax,
//   Â_k[i,s] = exp(Ã_k[i,s] − logsumexp_{i'≤i} Ã_k[i',s]),
// computed with the O(N·S) logcumsumexp op; incremental decoding keeps the running log-sum-exp
// per (batch, head, slot), so each step costs O(S) per head.
//
// Choices: invalid tokens are excluded from the prefix sums as well (their logits are set to
// -1e30 before logcumsumexp, so they add exactly 0), and their own rows of Â are zeroed, so a
// row whose prefix holds no valid token (a length-0 example) gives A = 0, never NaN; a padded
// row's output is then the bias path M_v's b, W_p, b_p, like §0's fully masked rows.
// Parameter names: w_t, m_k, m_v, w_p (Linear layers: .weight [out, in], .bias).
#include "core/random.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr int64_t kDefaultSlots = 64;
constexpr double kSlotSumEps = 1e-9;  // the double normalisation's (mixers.md §7)

// A Linear layer whose weight is truncated normal (std 0.02, cut at ±2 std), bias 0.
std::shared_ptr<Linear> truncated_linear(int64_t in, int64_t out, Generator& gen) {
  auto layer = std::make_shared<Linear>(in, out, true, gen);
  assign_in_place(layer->weight, init::truncated_normal({out, in}, 0.02, gen));
  return layer;
}

class ExternalAttention : public Mixer {
 public:
  explicit ExternalAttention(const MixerConfig& c) : Mixer(c) {
    expansion_ = c.get_int("expansion", 1);
    slots_ = c.get_int("slots", kDefaultSlots);
    int64_t dh = c.dim / c.heads, ed = expansion_ * c.dim;
    Generator gen(c.seed);
    w_t = register_module("w_t", truncated_linear(c.dim, ed, gen));
    m_k = register_module("m_k", truncated_linear(dh, slots_, gen));
    m_v = register_module("m_v", truncated_linear(slots_, dh, gen));
    w_p = register_module("w_p", truncated_linear(ed, c.dim, gen));
  }
  std::string type_name() const override { return "ExternalAttention"; }
  std::string extra_repr() const override {
    return "expansion=" + std::to_string(expansion_) + ", slots=" + std::to_string(slots_);
  }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    if (!config_.causal) {
      // The token softmax (invalid tokens get weight 0) and the slot normalisation, one kernel
      // on Ãᵀ [B, e·h, S, N], where the tokens are the last, contiguous axis; everything up to
      // Oᵀ stays in that layout: the products take the transposes as flags and nothing is copied
      // to move an axis.
      return read_memory(
          token_softmax_normalize(memory_logits_t(x), m_k->bias, ctx.valid, kSlotSumEps));
    }
    // Causal: the prefix softmax over tokens.
    Tensor logits = memory_logits(x);  // Ã [B, e·h, N, S]
    Tensor token_valid;                // [B, 1, N, 1]
    if (ctx.valid.defined()) {
      token_valid = reshape(ctx.valid, {x.size(0), 1, x.size(1), 1});
      logits = masked_fill(logits, add(neg(token_valid), 1.0), -1e30);
    }
    Tensor a_hat = exp(sub(logits, logcumsumexp(logits, 2)));
    if (token_valid.defined()) a_hat = mul(a_hat, token_valid);
    return read_memory(slot_normalised(a_hat));
  }

  // Incremental decoding: the running log-sum-exp over earlier positions, per (head, slot).
  struct Cache : MixerCache {
    Tensor lse;  // [B, e·h, 1, S]
    std::vector<Tensor*> batch_tensors() override { return {&lse}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    Tensor logits = memory_logits(x_t);  // [B, e·h, 1, S]
    // The same recursion as the full forward's logcumsumexp, continued from the cached value.
    cache.lse = cache.lse.defined()
                    ? contiguous(narrow(logcumsumexp(concat({cache.lse, logits}, 2), 2), 2, 1, 1))
                    : logits;
    ++cache.position;
    return read_memory(slot_normalised(exp(sub(logits, cache.lse))));
  }

 private:
  Tensor memory_logits(const Tensor& x) const {
    Tensor xp = mixers::split_heads(w_t->forward(x), expansion_ * config_.heads);
    return m_k->forward(xp);
  }
  // Ãᵀ − b_k = M_kᵀ X'ᵀ, [B, e·h, S, N]: the bias b_k, a constant along each slot's row, is
  // token_softmax_normalize's to take (it cancels in the softmax over the tokens).
  Tensor memory_logits_t(const Tensor& x) const {
    Tensor xp = mixers::split_heads(w_t->forward(x), expansion_ * config_.heads);
    return matmul(m_k->weight, transpose(xp, -1, -2));  // [S, d_h] · [B, e·h, d_h, N]
  }
  // The causal paths' double normalisation: Â [B, e·h, N, S] to Aᵀ [B, e·h, S, N], normalised
  // along the slots with the tokens contiguous (a transposed view in, one copy).
  static Tensor slot_normalised(const Tensor& a_hat) {
    return sum_normalize(transpose(a_hat, -1, -2), -2, kSlotSumEps);
  }
  // From Aᵀ [B, e·h, S, N]: O = A M_v + b_v [B, e·h, N, d_h], merged heads, W_p. M_v goes in as a
  // [1, 1, S, d_h] batch so the product reads A (a transposed view) in place; a 2-D right operand
  // would fold the batch into rows and need A contiguous.
  Tensor read_memory(const Tensor& a_t) const {
    Tensor a = transpose(a_t, -1, -2);
    capture_mixing(
        *this, "token-to-memory weights", RowRule::SumToOne, [&] { return a; }, "token",
        "memory slot");
    Tensor m_v_t = unsqueeze(unsqueeze(transpose(m_v->weight, 0, 1), 0), 0);
    Tensor o = bias_add(matmul(a, m_v_t), m_v->bias);
    return w_p->forward(mixers::merge_heads(o));
  }
  int64_t expansion_ = 1, slots_ = kDefaultSlots;
  std::shared_ptr<Linear> w_t, m_k, m_v, w_p;
};

}  // namespace

void register_external_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "external";
  info.summary =
      "external attention: token softmax against shared memories M_k, M_v, double "
      "normalisation (Guo et al. 2021)";
  info.capabilities.length = LengthSupport::Any;
  info.options = {
      MixerOption::integer("expansion", "1",
                           "expansion e of X' = X W_t (d → e·d; 4 in the paper's image models)", 1,
                           64),
      MixerOption::integer("slots", "64", "memory slots S of M_k : d_h → S and M_v : S → d_h", 1,
                           kMaxOptionSize)};
  info.build = [](const MixerConfig& c) { return std::make_shared<ExternalAttention>(c); };
  info.expected_parameters = [](const MixerConfig& c) {
    int64_t e = c.get_int("expansion", 1), s = c.get_int("slots", kDefaultSlots);
    int64_t d = c.dim, dh = c.dim / c.heads;
    return 2 * e * d * d + (e + 1) * d + 2 * dh * s + s + dh;
  };
  registry.add(std::move(info));
}

}  // namespace mixlab
