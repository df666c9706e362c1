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
//
// Layout: everything between W_t and W_p stays [B, N, e·h, ·] (token, head, then slot or
// feature). The heads are consecutive pieces of X''s rows, so each memory is one product over all
// B·N·e·h rows (4 heads of 32 against 64 slots at 49 tokens: [25088 × 32] × [32 × 64]), where a
// head-major layout [B, e·h, N, ·] made 512 products of [64 × 32] × [32 × 49] (at 38-43 GFLOP/s),
// and O is already the merged heads (no copy). The softmax over the tokens then runs down
// columns, in token_softmax_normalize's kernel.
#include "autograd/ops.h"
#include "core/random.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
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
      // The token softmax (invalid tokens get weight 0) and the slot normalisation in one kernel;
      // M_k's bias cancels in the softmax over the tokens and is the kernel's to take (its
      // gradient only).
      return read_memory(
          token_softmax_normalize(memory_logits(x, false), m_k->bias, ctx.valid, kSlotSumEps));
    }
    // Causal: the prefix softmax over tokens (axis 1).
    Tensor logits = memory_logits(x, true);  // Ã [B, N, e·h, S]
    Tensor token_valid;                      // [B, N, 1, 1]
    if (ctx.valid.defined()) {
      token_valid = reshape(ctx.valid, {x.size(0), x.size(1), 1, 1});
      logits = masked_fill(logits, add(neg(token_valid), 1.0), -1e30);
    }
    Tensor a_hat = exp(sub(logits, logcumsumexp(logits, 1)));
    if (token_valid.defined()) a_hat = mul(a_hat, token_valid);
    return read_memory(sum_normalize(a_hat, -1, kSlotSumEps));
  }

  // Incremental decoding: the running log-sum-exp over earlier positions, per (head, slot).
  struct Cache : MixerCache {
    Tensor lse;  // [B, 1, e·h, S]
    std::vector<Tensor*> batch_tensors() override { return {&lse}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    Tensor logits = memory_logits(x_t, true);  // [B, 1, e·h, S]
    // The same recursion as the full forward's logcumsumexp, continued from the cached value.
    cache.lse = cache.lse.defined()
                    ? contiguous(narrow(logcumsumexp(concat({cache.lse, logits}, 1), 1), 1, 1, 1))
                    : logits;
    ++cache.position;
    return read_memory(sum_normalize(exp(sub(logits, cache.lse)), -1, kSlotSumEps));
  }

 private:
  // Ã = X'_k M_kᵀ (+ b_k when with_bias) for every head at once, [B, N, e·h, S]: the heads are
  // consecutive d_h-wide pieces of X''s rows, so [B, N, e·h, d_h] is X' itself (no copy) and the
  // product is one [B·N·e·h, d_h] × [d_h, S], not one small product per example and head.
  Tensor memory_logits(const Tensor& x, bool with_bias) const {
    Tensor xp = w_t->forward(x);
    const int64_t heads = expansion_ * config_.heads;
    Tensor xh = reshape(xp, {x.size(0), x.size(1), heads, xp.size(2) / heads});
    return with_bias ? m_k->forward(xh) : matmul(xh, transpose(m_k->weight, 0, 1));
  }
  // From A [B, N, e·h, S]: O = A M_v + b_v [B, N, e·h, d_h] (one product over every row again),
  // which is already the merged heads [B, N, e·d], then W_p.
  Tensor read_memory(const Tensor& a) const {
    capture_mixing(
        *this, "token-to-memory weights", RowRule::SumToOne, [&] { return transpose(a, 1, 2); },
        "token", "memory slot");
    Tensor o = m_v->forward(a);
    return w_p->forward(reshape(o, {a.size(0), a.size(1), o.size(2) * o.size(3)}));
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
  info.test_options = {{{"expansion", "2"}, {"slots", "7"}}};
  registry.add(std::move(info));
}

}  // namespace mixlab
