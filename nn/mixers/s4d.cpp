// s4d: a diagonal state space per channel (mixers.md §16; Gu, Gupta, Goel and Ré 2022, "On the
// Parameterization and Initialization of Diagonal State Space Models").
//
//   Δ = exp(log_dt)                                                        [d]
//   A = −exp(A_re_log) + i·A_im                                            [d, n] (n = state)
//   Ā = exp(ΔA),   B̄ = (Ā − 1)/A                                           (zero-order hold, B = 1)
//   K_f[c, l] = 2·Re(Σ_k C_f[c,k] · B̄[c,k] · Ā[c,k]^l),  K_b likewise from C_b      (lags l ≥ 0)
//   causal:      S[i] = Σ_{j≤i} K_f[i−j] ⊙ x[j] + D ⊙ x[i]
//   non-causal:  S[i] = the same + Σ_{j>i} K_b[j−i] ⊙ x[j]    (K_b from lag 1: the diagonal once)
//   Y = GLU(GELU(S) W_out + b_out),   GLU([a, b]) = a ⊙ σ(b)          (W_out : d → 2d)
//
// x is zeroed at invalid positions, and so are the outputs there. Params d + 2dn + 4dn + d +
// 2d² + 2d. Any length; padding, exact length equivalence (the kernel depends on the lag only)
// and causality exact. In causal mode C_b is not used (it gets no gradient).
//
// Computation. Training builds K for the batch's N (the Vandermonde product Ā^l = e^{lΔA}, as
// the real and imaginary parts exp(l·Re ΔA)·cos(l·Im ΔA), exp(l·Re ΔA)·sin(l·Im ΔA) and one
// batched product over the modes) and convolves by FFT of length ≥ 2N (long_conv.h). Both
// directions are one circular convolution: K_f at lags 0…N−1, K_b at the wrapped lags −1…−(N−1).
// Incremental decoding runs the recurrence h_i = Ā ⊙ h_{i−1} + B̄ x_i,
// s_i = 2·Re(Σ_k C_f h_i) + D x_i, at O(dn) per step.
// Init: log_dt U[log 0.001, log 0.1]; A_re_log = log 0.5; A_im[c, k] = π·k (S4D-Lin);
// C_f, C_b normal with std √0.5 (their [.., 2] axis holds the real and imaginary parts);
// D standard normal; W_out xavier, zero bias.
// Parameter names: log_dt, A_re_log, A_im, C_f, C_b, D, w_out (a Linear: .weight [2d, d], .bias).
#include <cmath>
#include <numbers>

#include "core/random.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/mixers/common.h"
#include "nn/mixers/long_conv.h"
#include "nn/mixing_capture.h"

namespace mixlab {
namespace {

constexpr int64_t kDefaultState = 32;

int64_t state_size(const MixerConfig& c) { return c.get_int("state", kDefaultState); }

Tensor re(const Tensor& z) { return squeeze(narrow(z, -1, 0, 1), -1); }
Tensor im(const Tensor& z) { return squeeze(narrow(z, -1, 1, 1), -1); }

class DiagonalStateSpace : public Mixer {
 public:
  explicit DiagonalStateSpace(const MixerConfig& c) : Mixer(c) {
    int64_t d = c.dim, n = state_size(c);
    Generator gen(c.seed);
    log_dt =
        register_parameter("log_dt", Tensor::uniform({d}, std::log(0.001), std::log(0.1), gen));
    a_re_log = register_parameter("A_re_log", Tensor::full({d, n}, std::log(0.5)));
    std::vector<float> lin(static_cast<size_t>(d * n));
    for (int64_t ch = 0; ch < d; ++ch)
      for (int64_t k = 0; k < n; ++k) lin[ch * n + k] = static_cast<float>(std::numbers::pi * k);
    a_im = register_parameter("A_im", Tensor::from_data(lin, {d, n}));
    c_f = register_parameter("C_f", Tensor::normal({d, n, 2}, 0.0, std::sqrt(0.5), gen));
    c_b = register_parameter("C_b", Tensor::normal({d, n, 2}, 0.0, std::sqrt(0.5), gen));
    skip = register_parameter("D", Tensor::normal({d}, 0.0, 1.0, gen));
    w_out = register_module("w_out", std::make_shared<Linear>(d, 2 * d, true, gen));
  }
  std::string type_name() const override { return "DiagonalStateSpace"; }
  std::string extra_repr() const override { return "state=" + std::to_string(a_im.size(1)); }

  Tensor forward(const Tensor& x_in, const MixerContext& ctx) override {
    check_input(x_in, ctx);
    int64_t n = x_in.size(1);
    Tensor x = mixers::zero_invalid_rows(x_in, ctx.valid);
    Discrete z = discretise();
    Tensor k_f = kernel(z, c_f, lags(0, n, 1, x));  // [N, d], lags 0…N−1
    Tensor s;
    if (config_.causal) {
      capture(k_f, Tensor(), ctx, n);
      s = mixers::causal_fft_conv(x, k_f);
    } else {
      // One circular convolution of length L for both directions: K_f at rows 0…N−1, zeros,
      // then K_b at rows L−(N−1)…L−1, i.e. lags −(N−1)…−1 (the row order of `lags` below).
      int64_t length = mixers::fft_length(n);
      Tensor gap = Tensor::zeros({length - 2 * n + 1, x.size(2)}, x.dtype(), x.device());
      std::vector<Tensor> rows{k_f, gap};
      if (n > 1) rows.push_back(kernel(z, c_b, lags(n - 1, n - 1, -1, x)));  // lags N−1, …, 1
      if (mixing_capture_active())
        capture(k_f, n > 1 ? kernel(z, c_b, lags(1, n - 1, 1, x)) : Tensor(), ctx, n);
      s = mixers::circular_fft_conv(x, concat(rows, 0));
    }
    s = add(s, mul(x, skip));
    return mixers::zero_invalid_rows(glu(w_out->forward(gelu(s))), ctx.valid);
  }

  // Incremental decoding: the state h [B, d, n] (real and imaginary parts).
  struct Cache : MixerCache {
    Tensor h_re, h_im;              // [B, d, n]
    Tensor a_re, a_im, b_re, b_im;  // Ā and B̄, [d, n], formed at the first step
    std::vector<Tensor*> batch_tensors() override { return {&h_re, &h_im}; }
    bool reorderable() const override { return true; }
  };
  std::unique_ptr<MixerCache> new_cache() const override { return std::make_unique<Cache>(); }

  Tensor step(const Tensor& x_t, MixerCache& base, const MixerContext&) override {
    auto& cache = begin_step<Cache>(x_t, base);
    if (!cache.a_re.defined()) {
      Discrete z = discretise();
      cache.a_re = z.a_re, cache.a_im = z.a_im, cache.b_re = z.b_re, cache.b_im = z.b_im;
    }
    Tensor x = unsqueeze(squeeze(x_t, 1), -1);  // [B, d, 1]
    if (!cache.h_re.defined()) {
      // h_0 = B̄ x_0 (h_{−1} = 0).
      cache.h_re = mul(cache.b_re, x);
      cache.h_im = mul(cache.b_im, x);
    } else {
      // h = Ā ⊙ h + B̄ x, the complex product written out.
      Tensor h_re =
          add(sub(mul(cache.a_re, cache.h_re), mul(cache.a_im, cache.h_im)), mul(cache.b_re, x));
      Tensor h_im =
          add(add(mul(cache.a_re, cache.h_im), mul(cache.a_im, cache.h_re)), mul(cache.b_im, x));
      cache.h_re = h_re, cache.h_im = h_im;
    }
    ++cache.position;
    // s = 2·Re(Σ_k C_f h) + D x = 2·Σ_k (Re C_f · Re h − Im C_f · Im h) + D x.
    Tensor s = mul(sum(sub(mul(re(c_f), cache.h_re), mul(im(c_f), cache.h_im)), {2}), 2.0);
    s = add(unsqueeze(s, 1), mul(x_t, skip));  // [B, 1, d]
    return glu(w_out->forward(gelu(s)));
  }

  Tensor log_dt, a_re_log, a_im, c_f, c_b, skip;
  std::shared_ptr<Linear> w_out;

 private:
  // ΔA = Δ·(−exp(A_re_log) + i·A_im), Ā = exp(ΔA) and B̄ = (Ā − 1)/A, as real and imaginary
  // parts [d, n].
  struct Discrete {
    Tensor dt_a_re, dt_a_im, a_re, a_im, b_re, b_im;
  };
  Discrete discretise() const {
    Tensor dt = unsqueeze(exp(log_dt), 1);  // [d, 1]
    Tensor cont_re = neg(exp(a_re_log)), cont_im = a_im;
    Discrete z;
    z.dt_a_re = mul(dt, cont_re);
    z.dt_a_im = mul(dt, cont_im);
    Tensor magnitude = exp(z.dt_a_re);
    z.a_re = mul(magnitude, cos(z.dt_a_im));
    z.a_im = mul(magnitude, sin(z.dt_a_im));
    // (p + iq)/(a + ib) = ((pa + qb) + i(qa − pb)) / (a² + b²), with p + iq = Ā − 1.
    Tensor p = add(z.a_re, -1.0), q = z.a_im;
    Tensor norm = add(mul(cont_re, cont_re), mul(cont_im, cont_im));
    z.b_re = div(add(mul(p, cont_re), mul(q, cont_im)), norm);
    z.b_im = div(sub(mul(q, cont_re), mul(p, cont_im)), norm);
    return z;
  }

  // The lags first, first + step, … (count of them) as a [1, 1, count] constant.
  static Tensor lags(int64_t first, int64_t count, int64_t step, const Tensor& like) {
    std::vector<double> l(static_cast<size_t>(count));
    for (int64_t t = 0; t < count; ++t) l[t] = static_cast<double>(first + t * step);
    return to_device(cast(Tensor::from_data(l, {1, 1, count}), like.dtype()), like.device());
  }

  // K[l, c] = 2·Re(Σ_k C[c,k] B̄[c,k] Ā[c,k]^l) at the given lags [1, 1, M]: [M, d]. With
  // W = C·B̄ and Ā^l = e^{l·ΔA}: 2·Σ_k (Re W · e^{l Re ΔA} cos(l Im ΔA) − Im W · e^{l Re ΔA}
  // sin(l Im ΔA)), the sum over the modes as one batched product per channel.
  Tensor kernel(const Discrete& z, const Tensor& c, const Tensor& lag) const {
    Tensor w_re = sub(mul(re(c), z.b_re), mul(im(c), z.b_im));  // [d, n]
    Tensor w_im = add(mul(re(c), z.b_im), mul(im(c), z.b_re));
    Tensor decay = exp(mul(unsqueeze(z.dt_a_re, 2), lag));  // [d, n, M]
    Tensor angle = mul(unsqueeze(z.dt_a_im, 2), lag);
    Tensor powers = concat({mul(decay, cos(angle)), mul(decay, sin(angle))}, 1);  // [d, 2n, M]
    Tensor coefficients = unsqueeze(concat({w_re, neg(w_im)}, 1), 1);             // [d, 1, 2n]
    Tensor k = squeeze(matmul(coefficients, powers), 1);                          // [d, M]
    return transpose(mul(k, 2.0), 0, 1);
  }

  // For inspect: the channel mean of the Toeplitz matrices T[c, i, j] = K[c, i − j] (K_b above
  // the diagonal when not causal), and channels 0, d/4, d/2, 3d/4 alone; the columns of invalid
  // positions zeroed (their inputs are).
  void capture(const Tensor& k_f, const Tensor& k_b_later, const MixerContext& ctx, int64_t n) {
    if (!mixing_capture_active()) return;
    Tensor t = mixers::toeplitz_matrices(k_f, k_b_later, n);  // [d, N, N]
    Tensor keys = mixers::key_mask(ctx.valid);                // [B, 1, 1, N]
    auto masked = [&](Tensor m) { return keys.defined() ? mul(m, keys) : m; };
    capture_mixing(*this, "Toeplitz kernel, mean over channels", RowRule::Free,
                   [&] { return masked(unsqueeze(mean(t, {0}, true), 0)); });
    int64_t d = t.size(0);
    std::vector<Tensor> some;
    for (int64_t ch : {int64_t{0}, d / 4, d / 2, 3 * d / 4}) some.push_back(narrow(t, 0, ch, 1));
    capture_mixing(*this, "Toeplitz kernel of channels 0, d/4, d/2, 3d/4", RowRule::Free,
                   [&] { return masked(unsqueeze(concat(some, 0), 0)); });
  }
};

}  // namespace

void register_s4d_mixer(MixerRegistry& registry) {
  MixerInfo info;
  info.name = "s4d";
  info.summary =
      "diagonal state space per channel: long convolution K = 2Re(C B̄ Ā^l) by FFT, a recurrence "
      "when decoding (Gu, Gupta, Goel and Ré 2022)";
  info.capabilities.length = LengthSupport::Any;
  info.options = {
      MixerOption::integer("state", "32", "complex modes n per channel", 1, kMaxOptionSize)};
  info.build = [](const MixerConfig& c) { return std::make_shared<DiagonalStateSpace>(c); };
  info.expected_parameters = [](const MixerConfig& c) {
    int64_t d = c.dim, n = state_size(c);
    return d + 2 * d * n + 4 * d * n + d + 2 * d * d + 2 * d;
  };
  registry.add(std::move(info));
}

}  // namespace mixlab
