// linformer: low-rank attention along the length (mixers.md §12; Wang et al. 2020).
//
//   Q = X W_Q + b_Q
//   K̃ = (E[:, :N] X) W_K + b_K,   Ṽ = (F[:, :N] X) W_V + b_V      (E, F ∈ R^{p×ℓ})
//   A_k = softmax(Q_k K̃_kᵀ / √d_h)                                  (per head k)
//   Y = concat_k(A_k Ṽ_k) W_O + b_O
//
// p = max(1, ⌊ℓ/4⌋) by default (option proj-len). Xavier for every weight and for E, F (Glorot
// uniform on the [p, ℓ] matrices); biases 0. N ≤ ℓ (E, F sliced to their first N columns).
// Padding: the columns of E and F at invalid positions are zeroed, so the padding property and
// exact length equivalence hold. Causal: refused (each compressed key mixes every position).
// Params 4d² + 4d + 2pℓ.
// Choice: the option's default is written "0", meaning "the spec's default max(1, ⌊ℓ/4⌋)", so
// the default stays a parseable integer for any ℓ.
// Parameter names: E, F, w_q, w_k, w_v, w_o (Linear layers: .weight [d, d], .bias).
#include <algorithm>
#include <cmath>

#include "core/random.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

int64_t projected_length(const MixerConfig& c) {
  int64_t p = c.get_int("proj-len", 0);
  return p == 0 ? std::max<int64_t>(1, c.max_len / 4) : p;
}

class Linformer : public Mixer {
 public:
  explicit Linformer(const MixerConfig& c) : Mixer(c) {
    int64_t p = projected_length(c);
    Generator gen(c.seed);
    e = register_parameter("E", init::xavier_uniform({p, c.max_len}, gen));
    f = register_parameter("F", init::xavier_uniform({p, c.max_len}, gen));
    w_q = register_module("w_q", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_k = register_module("w_k", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_v = register_module("w_v", std::make_shared<Linear>(c.dim, c.dim, true, gen));
    w_o = register_module("w_o", std::make_shared<Linear>(c.dim, c.dim, true, gen));
  }
  std::string type_name() const override { return "Linformer"; }
  std::string extra_repr() const override { return "proj_len=" + std::to_string(e.size(0)); }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1), h = config_.heads;
    Tensor en = narrow(e, 1, 0, n), fn = narrow(f, 1, 0, n);  // [p, N]
    if (ctx.valid.defined()) {
      Tensor columns = unsqueeze(ctx.valid, 1);  // [B, 1, N]
      en = mul(en, columns);
      fn = mul(fn, columns);
    }
    Tensor q = mixers::split_heads(w_q->forward(x), h);              // [B, h, N, d_h]
    Tensor k = mixers::split_heads(w_k->forward(matmul(en, x)), h);  // [B, h, p, d_h]
    Tensor v = mixers::split_heads(w_v->forward(matmul(fn, x)), h);  // [B, h, p, d_h]
    double scale = 1.0 / std::sqrt(static_cast<double>(config_.dim / h));
    Tensor y = mixers::attend(q, k, v, Tensor(), scale, [&](const Tensor& a) {
      capture_mixing(
          *this, "attention over projected keys", RowRule::SumToOne, [&] { return a; }, "query",
          "projected key");
      capture_mixing(*this, "effective token mixing A·F", RowRule::Free,
                     [&] { return matmul(a, fn.dim() == 3 ? unsqueeze(fn, 1) : fn); });
    });
    return w_o->forward(mixers::merge_heads(y));
  }

 private:
  Tensor e, f;
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;
};

}  // namespace

void register_linformer_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "linformer";
  info.summary =
      "Linformer: attention against p keys and values projected along the length by E, F "
      "(Wang et al. 2020)";
  info.capabilities.length = LengthSupport::UpToMaxLen;
  info.capabilities.causal = false;
  info.capabilities.causal_refusal =
      "each compressed key and value mixes every position, so every output sees the future.";
  info.options = {MixerOption::integer("proj-len", "0",
                                       "projected length p of E, F ∈ R^{p×ℓ}; 0 = max(1, ⌊ℓ/4⌋)", 0,
                                       kMaxOptionSize)};
  info.build = [](const MixerConfig& c) { return std::make_shared<Linformer>(c); };
  info.expected_parameters = [](const MixerConfig& c) {
    return 4 * c.dim * c.dim + 4 * c.dim + 2 * projected_length(c) * c.max_len;
  };
  registry.add(std::move(info));
}

}  // namespace mixlab
