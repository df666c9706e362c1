// The Synthesizer family's logits, one class per kind (the equations are in
// nn/mixers/synthesizer.cpp's opening comment and mixers.md §3):
//   R, Fix  L_k = R_k[:N, :N], a table trained (R) or frozen (Fix);
//   D       L_k = relu(X W₁ + b₁)_k W₂ + b₂, the first N columns;
//   FR      L_k = R₁_k[:N] R₂_k[:N]ᵀ;
//   FD      L_k[i, u·b + v] = A_k[i,u] · B_k[i,v], the first N columns;
//   V       L_k = Q_k K_kᵀ / √d_h.
#include "nn/mixers/synthesizer_logits.h"

#include <cmath>
#include <set>

#include "nn/init.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"

namespace mixlab::synthesizer {
namespace {

// The FR rank r (--rank, default 8).
int64_t fr_rank(const MixerConfig& c) { return c.get_int("rank", 8); }

// The FD factor a (--fd-a; "auto", the default, is the divisor of ℓ nearest √ℓ, the smaller one
// on a tie). The registry has checked that a given a divides ℓ.
int64_t fd_a(const MixerConfig& c) {
  int64_t l = c.max_len;
  int64_t best = 1;
  double root = std::sqrt(static_cast<double>(l));
  for (int64_t a = 1; a <= l; ++a)
    if (l % a == 0 && std::abs(a - root) < std::abs(best - root)) best = a;
  std::string text = c.get_string("fd-a", "auto");
  return (text == "auto" || text.empty()) ? best : c.get_int("fd-a", best);
}

// `t`, times the one-element weight `alpha` when one is given.
Tensor scaled(const Tensor& t, const Tensor& alpha) { return alpha.defined() ? mul(t, alpha) : t; }

// R and Fix: a table R [h, ℓ, ℓ] sliced to [:N, :N].
class TableComponent : public Component {
 public:
  TableComponent(Registrar& reg, bool trainable) {
    int64_t h = reg.config.heads, l = reg.config.max_len;
    Tensor value = init::uniform({h, l, l}, std::sqrt(3.0 / static_cast<double>(l)), reg.gen);
    table_ = trainable ? reg.parameter("R", value) : reg.buffer("R_fix", value);
  }
  Tensor logits(const Tensor& x, const Tensor& alpha) const override {
    int64_t n = x.size(1);
    return unsqueeze(scaled(narrow(narrow(table_, 1, 0, n), 2, 0, n), alpha), 0);
  }
  Tensor row(const Tensor&, int64_t i, Tensor&, const Tensor& alpha) const override {
    return unsqueeze(scaled(narrow(narrow(table_, 1, i, 1), 2, 0, i + 1), alpha), 0);
  }

 private:
  Tensor table_;
};

// D and FD: row i's logits come from token i alone, so a whole sequence and one decoding step
// differ only in how many keys (columns) they see.
class PerTokenComponent : public Component {
 public:
  Tensor logits(const Tensor& x, const Tensor& alpha) const override {
    return columns(x, x.size(1), alpha);
  }
  Tensor row(const Tensor& x_t, int64_t i, Tensor&, const Tensor& alpha) const override {
    return columns(x_t, i + 1, alpha);
  }

 private:
  // [B, h, rows, cols]: every row's logits against the first `cols` keys.
  virtual Tensor columns(const Tensor& x, int64_t cols, const Tensor& alpha) const = 0;
};

// D: P = relu(X W₁ + b₁) per head, L_k = P_k W₂ + b₂ (first N columns).
class DenseComponent : public PerTokenComponent {
 public:
  explicit DenseComponent(Registrar& reg) : heads_(reg.config.heads) {
    int64_t d = reg.config.dim, l = reg.config.max_len;
    w_1_ = reg.linear("w_1", d, d);
    w_2_ = reg.linear("w_2", d / heads_, l);
  }

 private:
  // [B, h, rows, cols]: every row's logits against the first `cols` keys (α folded into W₂, b₂).
  // W₂ is shared by the heads, so it maps P as [B, rows, h, d_h] (no copy to split the heads) and
  // the result is seen as [B, h, rows, cols] (the core reads that view in place).
  Tensor columns(const Tensor& x, int64_t cols, const Tensor& alpha) const override {
    Tensor hidden = relu(w_1_->forward(x));  // [B, rows, d]
    Tensor p = reshape(hidden, {x.size(0), x.size(1), heads_, hidden.size(2) / heads_});
    Tensor l = linear(p, scaled(narrow(w_2_->weight, 0, 0, cols), alpha),
                      scaled(narrow(w_2_->bias, 0, 0, cols), alpha));
    return transpose(l, 1, 2);
  }
  int64_t heads_;
  std::shared_ptr<Linear> w_1_, w_2_;
};

// FR: L_k = R₁_k[:N] R₂_k[:N]ᵀ.
class FactorizedRandomComponent : public Component {
 public:
  explicit FactorizedRandomComponent(Registrar& reg) {
    int64_t h = reg.config.heads, l = reg.config.max_len, r = fr_rank(reg.config);
    double bound = std::sqrt(3.0 / static_cast<double>(r));
    r_1_ = reg.parameter("R_1", init::uniform({h, l, r}, bound, reg.gen));
    r_2_ = reg.parameter("R_2", init::uniform({h, l, r}, bound, reg.gen));
  }
  Tensor logits(const Tensor& x, const Tensor& alpha) const override {
    int64_t n = x.size(1);
    return unsqueeze(
        matmul(scaled(narrow(r_1_, 1, 0, n), alpha), transpose(narrow(r_2_, 1, 0, n), 1, 2)), 0);
  }
  Tensor row(const Tensor&, int64_t i, Tensor&, const Tensor& alpha) const override {
    return unsqueeze(
        matmul(scaled(narrow(r_1_, 1, i, 1), alpha), transpose(narrow(r_2_, 1, 0, i + 1), 1, 2)),
        0);
  }

 private:
  Tensor r_1_, r_2_;
};

// FD: L_k[i, u·b + v] = A_k[i,u] · B_k[i,v] (A repeated element-wise, B tiled).
class FactorizedDenseComponent : public PerTokenComponent {
 public:
  explicit FactorizedDenseComponent(Registrar& reg)
      : heads_(reg.config.heads), a_(fd_a(reg.config)), b_(reg.config.max_len / a_) {
    int64_t d = reg.config.dim;
    w_a_ = reg.linear("w_a", d, heads_ * a_);
    w_b_ = reg.linear("w_b", d, heads_ * b_);
  }

 private:
  // α is folded into W_A, b_A: α (A ⊗ B) = (α A) ⊗ B.
  Tensor columns(const Tensor& x, int64_t cols, const Tensor& alpha) const override {
    int64_t batch = x.size(0), rows = x.size(1);
    Tensor a_proj = linear(x, scaled(w_a_->weight, alpha), scaled(w_a_->bias, alpha));
    Tensor a = reshape(a_proj, {batch, rows, heads_, a_});
    Tensor b = reshape(w_b_->forward(x), {batch, rows, heads_, b_});
    Tensor l = reshape(outer_product(a, b), {batch, rows, heads_, a_ * b_});  // column u·b + v
    return narrow(transpose(l, 1, 2), 3, 0, cols);                            // [B, h, rows, cols]
  }
  int64_t heads_, a_, b_;
  std::shared_ptr<Linear> w_a_, w_b_;
};

// V: dot-product logits Q_k K_kᵀ / √d_h with their own projections; decoding caches K.
class DotProductComponent : public Component {
 public:
  explicit DotProductComponent(Registrar& reg) : heads_(reg.config.heads) {
    int64_t d = reg.config.dim;
    w_q_ = reg.linear("w_q", d, d);
    w_k_ = reg.linear("w_k", d, d);
    scale_ = 1.0 / std::sqrt(static_cast<double>(d / heads_));
  }
  Tensor logits(const Tensor& x, const Tensor& alpha) const override {
    Tensor q = queries(x, alpha);
    Tensor k = mixers::split_heads(w_k_->forward(x), heads_);
    return matmul(q, transpose(k, -1, -2));
  }
  Tensor row(const Tensor& x_t, int64_t, Tensor& k_cache, const Tensor& alpha) const override {
    Tensor q = queries(x_t, alpha);
    Tensor k = mixers::split_heads(w_k_->forward(x_t), heads_);
    k_cache = k_cache.defined() ? concat({k_cache, k}, 2) : k;
    return matmul(q, transpose(k_cache, -1, -2));
  }

  // The query and key maps as weights and biases {W_Q', b_Q', W_K, b_K}, W_Q' and b_Q' carrying
  // α/√d_h as in queries(): the mixer stacks them with W_V into one projection whose Q' and K
  // the attention core reads in place (Synthesizer::attend_with_dot_products).
  std::vector<Tensor> projections(const Tensor& alpha) const {
    return {scaled(mul(w_q_->weight, scale_), alpha), scaled(mul(w_q_->bias, scale_), alpha),
            w_k_->weight, w_k_->bias};
  }

 private:
  // Q·α/√d_h: the scale and α are folded into W_Q and b_Q, so the logits need no pass of their own.
  Tensor queries(const Tensor& x, const Tensor& alpha) const {
    std::vector<Tensor> p = projections(alpha);
    return mixers::split_heads(linear(x, p[0], p[1]), heads_);
  }

  int64_t heads_;
  double scale_;
  std::shared_ptr<Linear> w_q_, w_k_;
};

using ComponentPtr = std::unique_ptr<Component>;

// In the order of Kind.
const KindInfo kKinds[] = {
    {Kind::R, "R", [](const MixerConfig& c) { return c.heads * c.max_len * c.max_len; },
     [](Registrar& reg) -> ComponentPtr { return std::make_unique<TableComponent>(reg, true); }},
    {Kind::Fix, "Fix", [](const MixerConfig&) { return int64_t{0}; },
     [](Registrar& reg) -> ComponentPtr { return std::make_unique<TableComponent>(reg, false); }},
    {Kind::D, "D",
     [](const MixerConfig& c) {
       return c.dim * c.dim + c.dim + (c.dim / c.heads) * c.max_len + c.max_len;
     },
     [](Registrar& reg) -> ComponentPtr { return std::make_unique<DenseComponent>(reg); }},
    {Kind::FR, "FR", [](const MixerConfig& c) { return 2 * c.heads * c.max_len * fr_rank(c); },
     [](Registrar& reg) -> ComponentPtr {
       return std::make_unique<FactorizedRandomComponent>(reg);
     }},
    {Kind::FD, "FD",
     [](const MixerConfig& c) {
       int64_t a = fd_a(c);
       return c.heads * (a + c.max_len / a) * (c.dim + 1);
     },
     [](Registrar& reg) -> ComponentPtr {
       return std::make_unique<FactorizedDenseComponent>(reg);
     }},
    {Kind::V, "V", [](const MixerConfig& c) { return 2 * c.dim * c.dim + 2 * c.dim; },
     [](Registrar& reg) -> ComponentPtr { return std::make_unique<DotProductComponent>(reg); }},
};

std::string valid_components() {
  std::string out;
  for (const auto& k : kKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

}  // namespace

const KindInfo& kind_info(Kind k) { return kKinds[static_cast<size_t>(k)]; }

// "synth-mix:R+V" -> {R, V}; unknown, duplicate or missing components are MixerSpecErrors.
std::vector<Kind> parse_mix(const std::string& name) {
  const std::string family = "synth-mix";
  auto colon = name.find(':');
  if (name.rfind(family, 0) != 0 || colon != family.size() || colon + 1 >= name.size())
    spec_fail("mixer '", name,
              "': a synthesizer mix is written synth-mix:C1+...+CM with components from {",
              valid_components(), "}, e.g. synth-mix:R+V");
  std::vector<Kind> kinds;
  std::set<std::string> seen;
  std::string rest = name.substr(colon + 1);
  size_t start = 0;
  while (true) {
    size_t plus = rest.find('+', start);
    std::string part =
        rest.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    const KindInfo* found = nullptr;
    for (const auto& k : kKinds)
      if (part == k.name) found = &k;
    if (!found)
      spec_fail("mixer '", name, "': unknown synthesizer component '", part,
                "'; valid components: ", valid_components());
    if (!seen.insert(part).second)
      spec_fail("mixer '", name, "': component '", part, "' appears twice; each of ",
                valid_components(), " may appear once");
    kinds.push_back(found->kind);
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return kinds;
}

std::vector<Tensor> dot_product_projections(const Component& v, const Tensor& alpha) {
  return static_cast<const DotProductComponent&>(v).projections(alpha);
}

}  // namespace mixlab::synthesizer
