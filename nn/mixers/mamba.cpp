// mamba: the selective state space unit (Gu and Dao 2023, "Mamba: Linear-Time Sequence Modeling
// with Selective State Spaces"; mixers.md §17). The unit replaces the whole block
// (capabilities.block = Unit: x ← x + Drop(Mamba(LN(x)))), so this mixer IS the unit.
//
//   [u, z] = X W_in                                  (W_in : d → 2E, no bias; E = expand·d)
//   u ← SiLU(conv(u) + b_conv),  conv(u)[i, c] = Σ_{t<k} w_conv[c, t] · u[i − k + 1 + t, c]
//                                                    (u = 0 before the start and where invalid)
//   [δ, B, C] = u W_x                                (W_x : E → R + 2n, no bias; widths R, n, n)
//   Δ = softplus(δ W_dt + b_dt)                      (W_dt : R → E, one step per channel)
//   A = −exp(A_log)                                  ([E, n])
//   h_i[c, k] = exp(Δ_i[c] A[c, k]) h_{i−1}[c, k] + Δ_i[c] B_i[k] u_i[c],   h_{−1} = 0
//   y_i[c] = Σ_k C_i[k] h_i[c, k] + D[c] u_i[c]      (the selective scan: one op, one kernel)
//   Y = (y ⊙ SiLU(z)) W_out                          (W_out : E → d, no bias; 0 where invalid)
//
// Direction: left to right in every mode. An encoder's instance (causal = false) computes the
// same function as a decoder's, so capabilities.left_to_right is set, and the harness holds the
// non-causal instance to the causal property too.
// Options: expand (E = expand·d, default 2), state (n, 16), conv (k, 4), dt-rank (R; 0 means
// ⌈d/16⌉).
// Init: W_dt uniform ±R^{−1/2}; b_dt = softplus⁻¹(dt), dt = exp(U[log 0.001, log 0.1]) clamped
// to ≥ 1e-4; A_log[c, k] = log(k + 1); D = 1; W_in, W_x, W_out xavier (§0).
// Choices where the spec is silent:
//   - w_conv is uniform ±1/√k, PyTorch's Conv1d default (fan-in k for a depthwise filter), as
//     the paper's code leaves it; b_conv is 0 (§0: every bias not stated is 0).
//   - Padding: u is zeroed at invalid positions before the convolution, as the spec says; the
//     scan itself needs no mask (padding is on the right and the scan runs left to right), so
//     valid outputs never see a padded one, and the outputs at invalid positions are set to 0.
//   - Inspect draws the implicit attention of the scan, the matrix taking u to y − D ⊙ u,
//     averaged over channels: α[i, j] = mean_c Σ_k C_i[k] exp(A[c, k] Σ_{t=j+1}^{i} Δ_t[c])
//     Δ_j[c] B_j[k] for j ≤ i (0 above the diagonal and at invalid rows and columns).
// Params: W_in 2dE, w_conv Ek, b_conv E, W_x E(R + 2n), W_dt RE + E, A_log En, D E, W_out Ed:
//   3dE + E(k + 2R + 3n + 3).
// Parameters: w_in.weight [2E, d], conv_weight [E, k], conv_bias [E], w_x.weight [R + 2n, E],
// w_dt.weight [E, R], w_dt.bias [E], A_log [E, n], D [E], w_out.weight [d, E].
// Incremental decoding keeps h [B, E, n] and the last k − 1 inputs of the convolution: O(En) a
// step, the same recurrence as the scan.
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

struct MambaSizes {
  int64_t expanded, state, conv, rank;
  explicit MambaSizes(const MixerConfig& c)
      : expanded(c.get_int("expand", 2) * c.dim),
        state(c.get_int("state", 16)),
        conv(c.get_int("conv", 4)),
        rank(c.get_int("dt-rank", 0) > 0 ? c.get_int("dt-rank", 0) : (c.dim + 15) / 16) {}
};

Tensor mamba_silu(const Tensor& x) { return mul(x, sigmoid(x)); }

class Mamba : public Mixer {
 public:
  explicit Mamba(const MixerConfig& c) : Mixer(c), s_(c) {
    Generator gen(c.seed);
    const int64_t d = c.dim, e = s_.expanded, n = s_.state, k = s_.conv, r = s_.rank;
    w_in = register_module("w_in", std::make_shared<Linear>(d, 2 * e, false, gen));
    conv_weight =
        register_parameter("conv_weight", init::uniform({e, k}, 1.0 / std::sqrt(double(k)), gen));
    conv_bias = register_parameter("conv_bias", init::zeros({e}));
    w_x = register_module("w_x", std::make_shared<Linear>(e, r + 2 * n, false, gen));
    w_dt = register_module("w_dt", std::make_shared<Linear>(r, e, true, gen));
    assign_in_place(w_dt->weight, init::uniform({e, r}, 1.0 / std::sqrt(double(r)), gen));
    std::vector<float> dt_bias(static_cast<size_t>(e));  // parameters are float32 when built
    for (auto& b : dt_bias) {
      double dt = std::max(std::exp(gen.uniform(std::log(0.001), std::log(0.1))), 1e-4);
      b = static_cast<float>(dt + std::log(-std::expm1(-dt)));  // softplus⁻¹(dt) = log(eᵈᵗ − 1)
    }
    assign_in_place(w_dt->bias, Tensor::from_data(dt_bias, {e}));
    std::vector<float> a_log(static_cast<size_t>(e * n));
    for (int64_t ch = 0; ch < e; ++ch)
      for (int64_t j = 0; j < n; ++j)
        a_log[ch * n + j] = static_cast<float>(std::log(double(j + 1)));
    A_log = register_parameter("A_log", Tensor::from_data(a_log, {e, n}));
    D = register_parameter("D", init::ones({e}));
    w_out = register_module("w_out", std::make_shared<Linear>(e, d, false, gen));
  }
  std::string type_name() const override { return "Mamba"; }
  std::string extra_repr() const override {
    return "expanded=" + std::to_string(s_.expanded) + ", state=" + std::to_string(s_.state) +
           ", conv=" + std::to_string(s_.conv) + ", dt_rank=" + std::to_string(s_.rank);
  }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    const int64_t e = s_.expanded, k = s_.conv;
    Tensor u = mixers::zero_invalid_rows(in_half(x, 0), ctx.valid);  // [B, N, E]
    // The depthwise causal convolution: one "head" per channel, k − 1 taps to the left.
    u = mamba_silu(bias_add(token_conv(u, reshape(conv_weight, {1, 1, e, k}), k - 1), conv_bias));
    Tensor delta, b, c;
    selection(u, delta, b, c);
    Tensor a = neg(exp(A_log));
    // Read as attention: row i (query) mixes the inputs u_j (keys) j ≤ i.
    capture_mixing(*this, "implicit attention of the selective scan, mean over channels",
                   RowRule::Free, [&] { return implicit_attention(delta, a, b, c, ctx.valid); });
    Tensor y = selective_scan(u, delta, a, b, c, D);
    return mixers::zero_invalid_rows(w_out->forward(mul(y, mamba_silu(in_half(x, e)))), ctx.valid);
  }

  struct Cache : MixerCache {
    Tensor window;  // [B, k − 1, E]: the convolution's last k − 1 inputs (0 before the start)
    Tensor h;       // [B, E, n]: the scan's state
    std::vector<Tensor*> batch_tensors() override { return {&window, &h}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    const int64_t batch = x_t.size(0), e = s_.expanded, n = s_.state, k = s_.conv;
    if (!cache.h.defined()) {
      cache.window = Tensor::zeros({batch, k - 1, e}, x_t.dtype(), x_t.device());
      cache.h = Tensor::zeros({batch, e, n}, x_t.dtype(), x_t.device());
    }
    Tensor u = in_half(x_t, 0);                                              // [B, 1, E]
    Tensor inputs = k > 1 ? concat({cache.window, u}, 1) : u;                // [B, k, E]
    Tensor taps = transpose(conv_weight, 0, 1);                              // [k, E]
    u = mamba_silu(bias_add(sum(mul(inputs, taps), {1}, true), conv_bias));  // [B, 1, E]
    if (k > 1) cache.window = contiguous(narrow(inputs, 1, 1, k - 1));
    Tensor delta, b, c;
    selection(u, delta, b, c);
    Tensor dt = reshape(delta, {batch, e, 1});
    Tensor u_col = reshape(u, {batch, e, 1});
    // h ← exp(Δ A) ⊙ h + Δ u B, then y = C·h + D ⊙ u.
    Tensor decay = exp(mul(dt, neg(exp(A_log))));  // [B, E, n]
    cache.h = add(mul(decay, cache.h), mul(mul(dt, u_col), reshape(b, {batch, 1, n})));
    Tensor y =
        add(sum(mul(cache.h, reshape(c, {batch, 1, n})), {2}), mul(reshape(u, {batch, e}), D));
    ++cache.position;
    return w_out->forward(mul(reshape(y, {batch, 1, e}), mamba_silu(in_half(x_t, e))));
  }

 private:
  // u (first = 0) or z (first = E) of [u, z] = X W_in, each from its own rows of W_in.
  Tensor in_half(const Tensor& x, int64_t first) const {
    return linear(x, narrow(w_in->weight, 0, first, s_.expanded), Tensor());
  }

  // Δ = softplus(δ W_dt + b_dt), B and C from [δ, B, C] = u W_x.
  void selection(const Tensor& u, Tensor& delta, Tensor& b, Tensor& c) const {
    const int64_t r = s_.rank, n = s_.state;
    Tensor x_dbl = w_x->forward(u);
    delta = softplus(w_dt->forward(narrow(x_dbl, 2, 0, r)));
    b = contiguous(narrow(x_dbl, 2, r, n));
    c = contiguous(narrow(x_dbl, 2, r + n, n));
  }

  // α[b, i, j] = mean_c Σ_k C_i[k] exp(A[c, k] Σ_{t=j+1}^{i} Δ_t[c]) Δ_j[c] B_j[k], j ≤ i, as
  // [B, 1, N, N] (float64 on the host: this runs for inspect only). The decay is carried from
  // column j down the rows by one factor exp(A Δ_i) a row, so no difference of prefix sums loses
  // digits.
  Tensor implicit_attention(const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                            const Tensor& valid) const {
    const int64_t batch = delta.size(0), len = delta.size(1), e = s_.expanded, n = s_.state;
    auto dv = delta.to_double_vector(), av = a.to_double_vector(), bv = b.to_double_vector(),
         cv = c.to_double_vector();
    std::vector<double> ok(static_cast<size_t>(batch * len), 1.0);
    if (valid.defined()) ok = valid.to_double_vector();
    std::vector<double> alpha(static_cast<size_t>(batch * len * len), 0.0);
    for (int64_t item = 0; item < batch; ++item)
      for (int64_t ch = 0; ch < e; ++ch)
        for (int64_t st = 0; st < n; ++st)
          for (int64_t j = 0; j < len; ++j) {
            const int64_t rj = item * len + j;
            double w = dv[rj * e + ch] * bv[rj * n + st];
            for (int64_t i = j; i < len; ++i) {
              const int64_t ri = item * len + i;
              if (i > j) w *= std::exp(av[ch * n + st] * dv[ri * e + ch]);
              alpha[(item * len + i) * len + j] += cv[ri * n + st] * w / double(e);
            }
          }
    for (int64_t item = 0; item < batch; ++item)
      for (int64_t i = 0; i < len; ++i)
        for (int64_t j = 0; j < len; ++j)
          if (ok[item * len + i] == 0 || ok[item * len + j] == 0)
            alpha[(item * len + i) * len + j] = 0;
    return Tensor::from_data(alpha, {batch, 1, len, len});
  }

  MambaSizes s_;
  std::shared_ptr<Linear> w_in, w_x, w_dt, w_out;
  Tensor conv_weight, conv_bias, A_log, D;
};

int64_t mamba_parameters(const MixerConfig& c) {
  MambaSizes s(c);
  const int64_t d = c.dim, e = s.expanded;
  return 3 * d * e + e * (s.conv + 2 * s.rank + 3 * s.state + 3);
}

}  // namespace

void register_mamba_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "mamba";
  info.summary =
      "selective state space unit: conv, input-dependent scan h = exp(ΔA)h + ΔBu, y = Ch + Du, "
      "gated; left to right, replaces the block (Gu and Dao 2023)";
  info.capabilities.length = LengthSupport::Any;
  info.capabilities.left_to_right = true;
  info.capabilities.block = BlockStyle::Unit;
  info.options = {
      MixerOption::integer("expand", "2", "expansion: the scan runs over E = expand·d channels", 1,
                           64),
      MixerOption::integer("state", "16", "state size n per channel", 1, 1024),
      MixerOption::integer("conv", "4", "width k of the causal depthwise convolution", 1, 1024),
      MixerOption::integer("dt-rank", "0", "rank R of the step projection (0 means ⌈d/16⌉)", 0,
                           kMaxOptionSize)};
  info.build = [](const MixerConfig& c) { return std::make_shared<Mamba>(c); };
  info.expected_parameters = mamba_parameters;
  registry.add(std::move(info));
}

}  // namespace mixlab
