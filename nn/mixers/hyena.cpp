// hyena: implicit long convolutions with data-controlled gating, order 2 (mixers.md §18; Poli et
// al. 2023, "Hyena Hierarchy").
//
//   [v, x₁, x₂] = X W_in + b_in                                            (W_in : d → 3d)
//   u ← conv₃(u) + b_conv over those 3d channels, depthwise and causal:
//       conv₃(u)[i, c] = Σ_{t=0}^{2} w_conv[c, t] · u[i − 2 + t, c]     (u = 0 before 0 and where
//       invalid); no activation; then v, x₁, x₂ zeroed at invalid positions
//   filters: z(t) = [t/ℓ, cos(2πft/ℓ), sin(2πft/ℓ) for f = 1…F]                  (t = 0…ℓ−1)
//            [ĥ₁, ĥ₂](t) = Linear(64→2d) sin Linear(64→64) sin Linear(1+2F→64) z(t)
//            h_m[t, c] = ĥ_m[t, c] · exp(−(t/ℓ)·a_c),   a = linspace(3.07, 15.35, d)  (fixed)
//   z₀ = v,   z_m = x_m ⊙ (h_m *_c z_{m−1} + β_m ⊙ z_{m−1})   for m = 1, 2
//   Y = z₂ W_out + b_out                                                   (W_out : d → d)
//
// (h *_c z)[i] = Σ_{j≤i} h[i − j] z[j] per channel. Left to right in every mode: an encoder
// instance (causal = false) also sees only positions ≤ i, and the registry says so. N ≤ ℓ (the
// filters are functions of t/ℓ, so a position's filter does not depend on N). Outputs at
// invalid positions are 0. Padding, exact length equivalence and causality exact.
//
// Computation. The long convolutions run by FFT of length ≥ 2N (long_conv.h). Incremental
// decoding keeps the short convolution's last 2 inputs and the past streams z₀ and z₁ (newest
// first), O(i·d) at step i: there is no compact state.
// Init: W_in, W_out and the filter network's Linear layers xavier with zero biases; β_m standard
// normal; the short convolution's raw weight [3d, 3] Glorot-uniform read as [out = 3d, in = 3],
// U(±√(6/(3d+3))), zero bias (choice: §0's reading of "xavier", as lightconv's raw kernel).
// Params 3d² + 3d + 12d + d² + d + 2d + 64(1+2F) + 64 + 64·64 + 64 + 64·2d + 2d.
// Parameter names: w_in, w_conv, b_conv, w_out, beta_1, beta_2, filter_1, filter_2, filter_3;
// buffers features [ℓ, 1+2F] and window [ℓ, d] (exp(−(t/ℓ)·a_c)).
#include <cmath>
#include <numbers>

#include "core/random.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixers/long_conv.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr int64_t kDefaultBands = 8;
constexpr int64_t kFilterWidth = 64;
constexpr int64_t kShortConv = 3;
// The window's decay rates run from −log 0.01 / 1.5 to −log 0.01 / 0.3 (the paper's targets).
constexpr double kDecayFirst = 3.07, kDecayLast = 15.35;

int64_t bands(const MixerConfig& c) { return c.get_int("bands", kDefaultBands); }

class Hyena : public Mixer {
 public:
  explicit Hyena(const MixerConfig& c) : Mixer(c) {
    int64_t d = c.dim, f = bands(c), l = c.max_len;
    Generator gen(c.seed);
    w_in = register_module("w_in", std::make_shared<Linear>(d, 3 * d, true, gen));
    w_conv = register_parameter("w_conv", init::xavier_uniform({3 * d, kShortConv}, gen));
    b_conv = register_parameter("b_conv", init::zeros({3 * d}));
    w_out = register_module("w_out", std::make_shared<Linear>(d, d, true, gen));
    beta_1 = register_parameter("beta_1", Tensor::normal({d}, 0.0, 1.0, gen));
    beta_2 = register_parameter("beta_2", Tensor::normal({d}, 0.0, 1.0, gen));
    filter_1 =
        register_module("filter_1", std::make_shared<Linear>(1 + 2 * f, kFilterWidth, true, gen));
    filter_2 = register_module("filter_2",
                               std::make_shared<Linear>(kFilterWidth, kFilterWidth, true, gen));
    filter_3 =
        register_module("filter_3", std::make_shared<Linear>(kFilterWidth, 2 * d, true, gen));
    // z(t) = [t/ℓ, cos(2πft/ℓ), sin(2πft/ℓ) for f = 1…F] and the window exp(−(t/ℓ)·a_c).
    std::vector<float> z(static_cast<size_t>(l * (1 + 2 * f))), window(static_cast<size_t>(l * d));
    for (int64_t t = 0; t < l; ++t) {
      double s = static_cast<double>(t) / static_cast<double>(l);
      float* row = z.data() + t * (1 + 2 * f);
      row[0] = static_cast<float>(s);
      for (int64_t b = 1; b <= f; ++b) {
        row[2 * b - 1] = static_cast<float>(std::cos(2 * std::numbers::pi * b * s));
        row[2 * b] = static_cast<float>(std::sin(2 * std::numbers::pi * b * s));
      }
      for (int64_t ch = 0; ch < d; ++ch) {
        double a = d == 1 ? kDecayFirst
                          : kDecayFirst + (kDecayLast - kDecayFirst) * static_cast<double>(ch) /
                                              static_cast<double>(d - 1);
        window[t * d + ch] = static_cast<float>(std::exp(-s * a));
      }
    }
    features = register_buffer("features", Tensor::from_data(z, {l, 1 + 2 * f}));
    decay = register_buffer("window", Tensor::from_data(window, {l, d}));
  }
  std::string type_name() const override { return "Hyena"; }
  std::string extra_repr() const override { return "bands=" + std::to_string(bands(config_)); }

  Tensor forward(const Tensor& x, const MixerContext& ctx) override {
    check_input(x, ctx);
    int64_t n = x.size(1), d = config_.dim;
    Tensor u = mixers::zero_invalid_rows(w_in->forward(x), ctx.valid);
    u = mixers::zero_invalid_rows(short_conv(u), ctx.valid);
    std::vector<Tensor> parts = split(u, {d, d, d}, 2);  // v, x₁, x₂
    auto [h_1, h_2] = filters(n);                        // [N, d] each
    capture(h_1, h_2, parts[1], parts[2], n);
    Tensor z_1 = gate(parts[1], h_1, beta_1, parts[0]);
    Tensor z_2 = gate(parts[2], h_2, beta_2, z_1);
    return mixers::zero_invalid_rows(w_out->forward(z_2), ctx.valid);
  }

  // Incremental decoding: the short convolution's last 2 inputs, the past streams z₀ = v and z₁
  // (newest first, so that position i − j meets lag j), and the filters for all ℓ positions.
  struct Cache : MixerCache {
    Tensor u;         // [B, 2, 3d]
    Tensor z_0, z_1;  // [B, t, d], newest first
    Tensor h_1, h_2;  // [ℓ, d]
    std::vector<Tensor*> batch_tensors() override { return {&u, &z_0, &z_1}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    int64_t d = config_.dim, i = cache.position;
    if (!cache.h_1.defined()) {
      std::tie(cache.h_1, cache.h_2) = filters(config_.max_len);
      cache.u = Tensor::zeros({x_t.size(0), kShortConv - 1, 3 * d}, x_t.dtype(), x_t.device());
    }
    Tensor window = concat({cache.u, w_in->forward(x_t)}, 1);  // [B, 3, 3d]
    cache.u = contiguous(narrow(window, 1, 1, kShortConv - 1));
    Tensor u = narrow(short_conv(window), 1, kShortConv - 1, 1);  // this position's row
    std::vector<Tensor> parts = split(u, {d, d, d}, 2);
    ++cache.position;
    // (h *_c z)[i] = Σ_{j ≤ i} h[j] ⊙ z[i − j], the streams stored newest first.
    auto long_conv_at = [&](const Tensor& h, const Tensor& newest_first) {
      return sum(mul(narrow(h, 0, 0, i + 1), newest_first), {1}, true);  // [B, 1, d]
    };
    cache.z_0 = i == 0 ? parts[0] : concat({parts[0], cache.z_0}, 1);
    Tensor z_1 = mul(parts[1], add(long_conv_at(cache.h_1, cache.z_0), mul(parts[0], beta_1)));
    cache.z_1 = i == 0 ? z_1 : concat({z_1, cache.z_1}, 1);
    Tensor z_2 = mul(parts[2], add(long_conv_at(cache.h_2, cache.z_1), mul(z_1, beta_2)));
    return w_out->forward(z_2);
  }

  std::shared_ptr<Linear> w_in, w_out, filter_1, filter_2, filter_3;
  Tensor w_conv, b_conv, beta_1, beta_2, features, decay;

 private:
  // The depthwise causal convolution of width 3 plus its bias, over u [B, N, 3d].
  Tensor short_conv(const Tensor& u) const {
    Tensor taps = reshape(w_conv, {1, 1, 3 * config_.dim, kShortConv});
    return bias_add(token_conv(u, taps, kShortConv - 1), b_conv);
  }

  // h₁, h₂ [N, d]: the implicit filter network on the first N positions' features, windowed.
  std::pair<Tensor, Tensor> filters(int64_t n) const {
    Tensor z = narrow(features, 0, 0, n);
    Tensor hidden = sin(filter_2->forward(sin(filter_1->forward(z))));
    std::vector<Tensor> h = split(filter_3->forward(hidden), {config_.dim, config_.dim}, 1);
    Tensor window = narrow(decay, 0, 0, n);
    return {mul(h[0], window), mul(h[1], window)};
  }

  // z_m = x_m ⊙ (h_m *_c z_{m−1} + β_m ⊙ z_{m−1}).
  static Tensor gate(const Tensor& x_m, const Tensor& h_m, const Tensor& beta_m,
                     const Tensor& previous) {
    return mul(x_m, add(mixers::causal_fft_conv(previous, h_m), mul(previous, beta_m)));
  }

  // For inspect: |diag(x₂)(H₂ + diag β₂) diag(x₁)(H₁ + diag β₁)|, the map from v to z₂ of each
  // channel, averaged over the channels: [B, 1, N, N].
  void capture(const Tensor& h_1, const Tensor& h_2, const Tensor& x_1, const Tensor& x_2,
               int64_t n) {
    capture_mixing(*this,
                   "data-controlled matrix |diag(x₂)(H₂+β₂)diag(x₁)(H₁+β₁)|, mean over "
                   "channels",
                   RowRule::Free, [&] {
                     Tensor eye = tril_mask(n, n, 0, h_1.dtype(), h_1.device());
                     eye = mul(eye, transpose(eye, 0, 1));  // the identity [N, N]
                     auto operator_of = [&](const Tensor& h, const Tensor& beta) {
                       return add(mixers::toeplitz_matrices(h, Tensor(), n),
                                  mul(reshape(beta, {config_.dim, 1, 1}), eye));  // [d, N, N]
                     };
                     Tensor t_1 = operator_of(h_1, beta_1), t_2 = operator_of(h_2, beta_2);
                     // [B, d, N, 1] and [B, d, 1, N] views of x₂ (rows) and x₁ (columns of T₂).
                     Tensor rows = unsqueeze(permute(x_2, {0, 2, 1}), 3);
                     Tensor cols = unsqueeze(permute(x_1, {0, 2, 1}), 2);
                     Tensor m = mul(rows, matmul(mul(t_2, cols), t_1));  // [B, d, N, N]
                     return mean(abs(m), {1}, true);
                   });
  }
};

}  // namespace

void register_hyena_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "hyena";
  info.summary =
      "Hyena order 2: implicit long convolutions (a sine network over positions) by FFT, gated "
      "by projections of the input; left to right (Poli et al. 2023)";
  info.capabilities.length = LengthSupport::UpToMaxLen;
  info.capabilities.left_to_right = true;
  info.options = {MixerOption::integer("bands", "8", "frequency bands F of the filter features", 1,
                                       kMaxOptionSize)};
  info.build = [](const MixerConfig& c) { return std::make_shared<Hyena>(c); };
  info.expected_parameters = [](const MixerConfig& c) {
    int64_t d = c.dim, f = bands(c), w = kFilterWidth;
    int64_t projections = (3 * d * d + 3 * d) + (3 * d * kShortConv + 3 * d) + (d * d + d);
    int64_t filter = (1 + 2 * f) * w + w + w * w + w + w * 2 * d + 2 * d;
    return projections + 2 * d + filter;
  };
  registry.add(std::move(info));
}

}  // namespace mixlab
