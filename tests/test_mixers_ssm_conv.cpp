// s4d (mixers.md §16) and hyena (§18) against their equations written as plain float64 loops,
// their decoding recurrences against the parallel (FFT) forms over whole sequences in float32
// and float64, the FFT convolution against the direct sum, and the matrices they hand to inspect.
#include <cmath>
#include <complex>
#include <numbers>

#include "autograd/gradcheck.h"
#include "core/parallel.h"
#include "nn/mixers/long_conv.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace ssm_conv_test {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

// x [1, N, d] as rows.
Matrix rows(const Tensor& x) {
  auto v = x.to_double_vector();
  int64_t n = x.size(1), d = x.size(2);
  Matrix m(n, std::vector<double>(d));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < d; ++c) m[i][c] = v[i * d + c];
  return m;
}

std::vector<double> values(const Mixer& m, const std::string& name) {
  return param(m, name).to_double_vector();
}

// y = x Wᵀ + b for one row, W [out, in] row-major.
std::vector<double> linear_row(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b) {
  size_t out = b.size(), in = x.size();
  std::vector<double> y(b);
  for (size_t o = 0; o < out; ++o)
    for (size_t i = 0; i < in; ++i) y[o] += w[o * in + i] * x[i];
  return y;
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// The s4d kernels K[c][l] = 2 Re(Σ_k C B̄ Ā^l), lags 0…n−1, from the mixer's parameters.
Matrix s4d_kernel(const Mixer& m, const std::string& c_name, int64_t d, int64_t state, int64_t n) {
  auto log_dt = values(m, "log_dt"), a_re_log = values(m, "A_re_log"), a_im = values(m, "A_im"),
       c = values(m, c_name);
  Matrix k(d, std::vector<double>(n, 0.0));
  for (int64_t ch = 0; ch < d; ++ch)
    for (int64_t s = 0; s < state; ++s) {
      std::complex<double> a(-std::exp(a_re_log[ch * state + s]), a_im[ch * state + s]);
      std::complex<double> a_bar = std::exp(std::exp(log_dt[ch]) * a);
      std::complex<double> b_bar = (a_bar - 1.0) / a;
      std::complex<double> coef(c[(ch * state + s) * 2], c[(ch * state + s) * 2 + 1]);
      for (int64_t l = 0; l < n; ++l)
        k[ch][l] += 2 * std::real(coef * b_bar * std::pow(a_bar, static_cast<double>(l)));
    }
  return k;
}

// §16 as loops: x [1, N, d] with the first `len` positions valid.
Matrix s4d_reference(const Mixer& m, const Tensor& x_t, int64_t len, bool causal) {
  Matrix x = rows(x_t);
  int64_t n = x_t.size(1), d = x_t.size(2), state = param(m, "A_im").size(1);
  for (int64_t i = len; i < n; ++i) std::fill(x[i].begin(), x[i].end(), 0.0);
  Matrix k_f = s4d_kernel(m, "C_f", d, state, n), k_b = s4d_kernel(m, "C_b", d, state, n);
  auto skip = values(m, "D"), w = values(m, "w_out.weight"), b = values(m, "w_out.bias");
  Matrix y(n, std::vector<double>(d, 0.0));
  for (int64_t i = 0; i < len; ++i) {
    std::vector<double> s(d);
    for (int64_t c = 0; c < d; ++c) {
      s[c] = skip[c] * x[i][c];
      for (int64_t j = 0; j < n; ++j) {
        if (j <= i) s[c] += k_f[c][i - j] * x[j][c];
        if (j > i && !causal) s[c] += k_b[c][j - i] * x[j][c];
      }
      s[c] = gelu(s[c]);
    }
    auto h = linear_row(s, w, b);
    for (int64_t c = 0; c < d; ++c) y[i][c] = h[c] * sigmoid(h[d + c]);
  }
  return y;
}

// §18 as loops, with v, x₁, x₂ handed back for the inspect check.
struct HyenaTrace {
  Matrix y, v, x1, x2, h1, h2;
};
HyenaTrace hyena_reference(const Mixer& m, const Tensor& x_t, int64_t len) {
  Matrix x = rows(x_t);
  int64_t n = x_t.size(1), d = x_t.size(2), l = m.config().max_len;
  int64_t f = m.config().get_int("bands", 8);
  auto w_in = values(m, "w_in.weight"), b_in = values(m, "w_in.bias");
  auto w_conv = values(m, "w_conv"), b_conv = values(m, "b_conv");
  Matrix u(n), conv(n, std::vector<double>(3 * d, 0.0));
  for (int64_t i = 0; i < n; ++i)
    u[i] = i < len ? linear_row(x[i], w_in, b_in) : std::vector<double>(3 * d, 0.0);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t c = 0; c < 3 * d; ++c) {
      conv[i][c] = b_conv[c];
      for (int64_t t = 0; t < 3; ++t)
        if (i - 2 + t >= 0) conv[i][c] += w_conv[c * 3 + t] * u[i - 2 + t][c];
    }
  HyenaTrace r;
  r.v = r.x1 = r.x2 = Matrix(n, std::vector<double>(d, 0.0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < d; ++c)
      r.v[i][c] = conv[i][c], r.x1[i][c] = conv[i][d + c], r.x2[i][c] = conv[i][2 * d + c];
  // The filters from the sine network, windowed.
  auto w1 = values(m, "filter_1.weight"), b1 = values(m, "filter_1.bias");
  auto w2 = values(m, "filter_2.weight"), b2 = values(m, "filter_2.bias");
  auto w3 = values(m, "filter_3.weight"), b3 = values(m, "filter_3.bias");
  r.h1 = r.h2 = Matrix(n, std::vector<double>(d));
  for (int64_t t = 0; t < n; ++t) {
    // The features and the window are float32 buffers (as checkpoints store them).
    auto stored = [](double v) { return static_cast<double>(static_cast<float>(v)); };
    double s = static_cast<double>(t) / l;
    std::vector<double> z{stored(s)};
    for (int64_t b = 1; b <= f; ++b) {
      z.push_back(stored(std::cos(2 * std::numbers::pi * b * s)));
      z.push_back(stored(std::sin(2 * std::numbers::pi * b * s)));
    }
    auto h = linear_row(z, w1, b1);
    for (double& e : h) e = std::sin(e);
    h = linear_row(h, w2, b2);
    for (double& e : h) e = std::sin(e);
    h = linear_row(h, w3, b3);
    for (int64_t c = 0; c < d; ++c) {
      double a = 3.07 + (15.35 - 3.07) * static_cast<double>(c) / static_cast<double>(d - 1);
      r.h1[t][c] = h[c] * stored(std::exp(-s * a));
      r.h2[t][c] = h[d + c] * stored(std::exp(-s * a));
    }
  }
  auto beta1 = values(m, "beta_1"), beta2 = values(m, "beta_2");
  auto order = [&](const Matrix& gate, const Matrix& h, const std::vector<double>& beta,
                   const Matrix& z) {
    Matrix out(n, std::vector<double>(d, 0.0));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) {
        double s = beta[c] * z[i][c];
        for (int64_t j = 0; j <= i; ++j) s += h[i - j][c] * z[j][c];
        out[i][c] = gate[i][c] * s;
      }
    return out;
  };
  Matrix z2 = order(r.x2, r.h2, beta2, order(r.x1, r.h1, beta1, r.v));
  auto w_out = values(m, "w_out.weight"), b_out = values(m, "w_out.bias");
  r.y = Matrix(n, std::vector<double>(d, 0.0));
  for (int64_t i = 0; i < len; ++i) r.y[i] = linear_row(z2[i], w_out, b_out);
  return r;
}

void check_rows_close(const Tensor& y, const Matrix& want, double tol) {
  auto got = y.to_double_vector();
  int64_t d = y.size(2);
  for (size_t i = 0; i < want.size(); ++i)
    for (int64_t c = 0; c < d; ++c) {
      INFO("row " << i << " channel " << c);
      CHECK(std::abs(got[i * d + c] - want[i][c]) <= tol * (1 + std::abs(want[i][c])));
    }
}

MixerConfig config(const std::string& name, bool causal, int64_t dim, int64_t max_len) {
  MixerConfig c = small_config(name, causal);
  c.dim = dim;
  c.max_len = max_len;
  return c;
}

// Decodes x [B, N, d] position by position and returns the largest difference from forward().
double decoding_gap(Mixer& m, const Tensor& x) {
  NoGradGuard no_grad;
  Tensor full = m.forward(x, context_for(x, {}, true));
  auto cache = m.new_cache();
  double worst = 0.0;
  for (int64_t t = 0; t < x.size(1); ++t) {
    Tensor y_t = m.step(contiguous(narrow(x, 1, t, 1)), *cache, context_for(x, {}, true));
    auto a = y_t.to_double_vector();
    auto b = contiguous(narrow(full, 1, t, 1)).to_double_vector();
    for (size_t e = 0; e < a.size(); ++e)
      worst = std::max(worst, std::abs(a[e] - b[e]) / (1 + std::abs(b[e])));
  }
  return worst;
}

}  // namespace ssm_conv_test

using namespace ssm_conv_test;

TEST_CASE("long convolution: the FFT form equals the direct sum, causal and two-sided") {
  NoGradGuard no_grad;
  for (int64_t n : {1, 5, 13}) {
    INFO("N = " << n);
    Tensor x = rand64({2, n, 3}, 31, false), h = rand64({n + 2, 3}, 32, false);
    auto got = mixers::causal_fft_conv(x, h).to_double_vector();
    auto xv = x.to_double_vector(), hv = h.to_double_vector();
    std::vector<double> want(got.size(), 0.0);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t j = 0; j <= i; ++j)
            want[(b * n + i) * 3 + c] += hv[(i - j) * 3 + c] * xv[(b * n + j) * 3 + c];
    check_close(got, want, 1e-12);
    // Two-sided: lag −m at row L − m.
    int64_t length = mixers::fft_length(n);
    CHECK(length >= 2 * n);
    Tensor k = rand64({length, 3}, 33, false);
    auto kv = k.to_double_vector();
    auto two = mixers::circular_fft_conv(x, k).to_double_vector();
    std::fill(want.begin(), want.end(), 0.0);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t j = 0; j < n; ++j) {
            int64_t row = j <= i ? i - j : length - (j - i);
            want[(b * n + i) * 3 + c] += kv[row * 3 + c] * xv[(b * n + j) * 3 + c];
          }
    check_close(two, want, 1e-12);
  }
  CHECK(mixers::fft_length(7) == 15);
  CHECK(mixers::fft_length(50) == 100);
  CHECK(mixers::fft_length(11) == 24);
}

TEST_CASE("long convolution: float64 gradients of the input and the kernel") {
  Tensor x = rand64({2, 6, 3}, 34), h = rand64({6, 3}, 35);
  auto result = gradcheck_leaves([&] { return mixers::causal_fft_conv(x, h); }, {x, h});
  INFO("worst: " << result.worst);
  CHECK(result.ok);
}

TEST_CASE("long convolution: float32 values and gradients, the same bits at 1 and 2 threads") {
  auto run = [](int threads) {
    set_num_threads(threads);
    Tensor x = cast(rand64({5, 13, 6}, 36, false), DType::F32);
    Tensor k = cast(rand64({27, 6}, 37, false), DType::F32);
    x.set_requires_grad();
    k.set_requires_grad();
    Tensor y = mixers::circular_fft_conv(x, k);
    y.backward(cast(rand64({5, 13, 6}, 38, false), DType::F32));
    return std::vector<std::vector<double>>{y.to_double_vector(), x.grad().to_double_vector(),
                                            k.grad().to_double_vector()};
  };
  const int saved = num_threads();
  auto one = run(1), two = run(2);
  set_num_threads(saved);
  CHECK(one == two);
  CHECK(one[2] != std::vector<double>(one[2].size(), 0.0));  // the kernel's gradient was written
}

TEST_CASE("long convolution: a kernel shorter than 2N − 1 names the op and both shapes") {
  Tensor x = rand64({2, 5, 3}, 39, false), k = rand64({8, 3}, 40, false);
  for (bool op : {false, true}) {
    std::string message;
    try {
      op ? circular_conv(x, k) : mixers::circular_fft_conv(x, k);
    } catch (const Error& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find(op ? "circular_conv:" : "circular_fft_conv:") != std::string::npos);
    CHECK(message.find(shape_str(x.shape())) != std::string::npos);
    CHECK(message.find(shape_str(k.shape())) != std::string::npos);
  }
}

TEST_CASE("s4d: equals its equations as float64 loops, causal or not, padded or not") {
  for (bool causal : {false, true})
    for (int64_t len : {7, 4}) {
      INFO(std::string(causal ? "causal" : "non-causal") << ", length " << len << " of 7");
      MixerConfig c = config("s4d", causal, 6, 8);
      c.options = {{"state", "3"}};
      auto m = build64(c);
      NoGradGuard no_grad;
      Tensor x = rand64({1, 7, 6}, 40, false);
      Tensor y = m->forward(
          x, context_for(x, len == 7 ? std::vector<int32_t>{} : std::vector<int32_t>{int32_t(len)},
                         causal));
      check_rows_close(y, s4d_reference(*m, x, len, causal), 1e-10);
    }
}

TEST_CASE("s4d: its initialisation is the spec's") {
  MixerConfig c = config("s4d", false, 8, 8);
  auto m = make_mixer(c);
  auto a_im = values(*m, "A_im"), a_re_log = values(*m, "A_re_log"), log_dt = values(*m, "log_dt");
  REQUIRE(a_im.size() == 8 * 32);  // state 32 by default
  CHECK(a_im[5] == doctest::Approx(5 * std::numbers::pi));
  CHECK(a_im[32 + 31] == doctest::Approx(31 * std::numbers::pi));
  for (double v : a_re_log) CHECK(v == doctest::Approx(std::log(0.5)));
  for (double v : log_dt) CHECK((v >= std::log(0.001) && v <= std::log(0.1)));
}

TEST_CASE("s4d: the recurrence equals the FFT form over a whole sequence") {
  // The default state and lengths past the harness's 6: float64 to 1e-10, float32 to its
  // rounding (the two forms sum the same terms in different orders).
  for (bool f64 : {true, false}) {
    INFO(std::string(f64 ? "float64" : "float32"));
    MixerConfig c = config("s4d", true, 16, 64);
    auto m = make_mixer(c);
    m->eval();
    if (f64) m->to(DType::F64);
    Tensor x = f64 ? rand64({2, 48, 16}, 41, false) : rand32({2, 48, 16}, 41);
    double gap = decoding_gap(*m, x);
    INFO("largest relative gap " << gap);
    CHECK(gap < (f64 ? 1e-10 : 2e-4));
  }
}

TEST_CASE("s4d: a decoding step keeps only the state, whatever the position") {
  auto m = build64(config("s4d", true, 8, 8));
  auto cache = m->new_cache();
  NoGradGuard no_grad;
  MixerContext ctx;
  ctx.causal = true;
  for (int64_t t = 0; t < 20; ++t) m->step(rand64({2, 1, 8}, 50 + t, false), *cache, ctx);
  for (Tensor* t : cache->batch_tensors()) CHECK(t->shape() == Shape{2, 8, 32});
}

TEST_CASE("hyena: equals its equations as float64 loops, in both modes, padded or not") {
  for (bool causal : {false, true})
    for (int64_t len : {7, 4}) {
      INFO(std::string(causal ? "causal" : "non-causal") << ", length " << len << " of 7");
      MixerConfig c = config("hyena", causal, 6, 9);
      c.options = {{"bands", "3"}};
      auto m = build64(c);
      NoGradGuard no_grad;
      Tensor x = rand64({1, 7, 6}, 42, false);
      Tensor y = m->forward(
          x, context_for(x, len == 7 ? std::vector<int32_t>{} : std::vector<int32_t>{int32_t(len)},
                         causal));
      check_rows_close(y, hyena_reference(*m, x, len).y, 1e-10);
    }
}

TEST_CASE("hyena: decoding equals the FFT form up to ℓ, in float64 and float32") {
  for (bool f64 : {true, false}) {
    INFO(std::string(f64 ? "float64" : "float32"));
    auto m = make_mixer(config("hyena", true, 16, 40));
    m->eval();
    if (f64) m->to(DType::F64);
    Tensor x = f64 ? rand64({2, 40, 16}, 43, false) : rand32({2, 40, 16}, 43);
    double gap = decoding_gap(*m, x);
    INFO("largest relative gap " << gap);
    CHECK(gap < (f64 ? 1e-10 : 2e-4));
  }
}

TEST_CASE("s4d and hyena: inspect gets the matrices their sections name") {
  SUBCASE("s4d: the channel-mean Toeplitz kernel, K_b above the diagonal when not causal") {
    for (bool causal : {false, true}) {
      INFO(std::string(causal ? "causal" : "non-causal"));
      MixerConfig c = config("s4d", causal, 8, 8);
      c.options = {{"state", "4"}};
      auto m = build64(c);
      Tensor x = rand64({1, 6, 8}, 44, false);
      MixingRecorder recorder(*m);
      NoGradGuard no_grad;
      m->forward(x, context_for(x, {}, causal));
      REQUIRE(recorder.matrices().size() == 2);
      const MixingMatrix& mean = recorder.matrices()[0];
      const MixingMatrix& single = recorder.matrices()[1];
      REQUIRE(mean.shape == std::vector<int64_t>{1, 1, 6, 6});
      REQUIRE(single.shape == std::vector<int64_t>{1, 4, 6, 6});
      Matrix k_f = s4d_kernel(*m, "C_f", 8, 4, 6), k_b = s4d_kernel(*m, "C_b", 8, 4, 6);
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t j = 0; j < 6; ++j) {
          double want = 0.0;
          for (int64_t ch = 0; ch < 8; ++ch)
            want += (j <= i ? k_f[ch][i - j] : (causal ? 0.0 : k_b[ch][j - i])) / 8;
          CHECK(mean.at(0, 0, i, j) == doctest::Approx(want).epsilon(1e-9));
          double channel_2 = j <= i ? k_f[2][i - j] : (causal ? 0.0 : k_b[2][j - i]);
          CHECK(single.at(0, 1, i, j) == doctest::Approx(channel_2).epsilon(1e-9));
        }
    }
  }
  SUBCASE("hyena: |diag(x₂)(H₂ + β₂) diag(x₁)(H₁ + β₁)| averaged over channels") {
    MixerConfig c = config("hyena", false, 6, 8);
    auto m = build64(c);
    Tensor x = rand64({1, 5, 6}, 45, false);
    MixingRecorder recorder(*m);
    NoGradGuard no_grad;
    m->forward(x, context_for(x, {}, false));
    REQUIRE(recorder.matrices().size() == 1);
    const MixingMatrix& mm = recorder.matrices()[0];
    REQUIRE(mm.shape == std::vector<int64_t>{1, 1, 5, 5});
    HyenaTrace r = hyena_reference(*m, x, 5);
    auto beta1 = values(*m, "beta_1"), beta2 = values(*m, "beta_2");
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        double want = 0.0;
        for (int64_t ch = 0; ch < 6; ++ch) {
          // Σ_m (H₂ + β₂)[i, m] x₁[m] (H₁ + β₁)[m, j], all lower-triangular.
          double s = 0.0;
          for (int64_t mid = j; mid <= i; ++mid) {
            double t2 = r.h2[i - mid][ch] + (mid == i ? beta2[ch] : 0.0);
            double t1 = r.h1[mid - j][ch] + (mid == j ? beta1[ch] : 0.0);
            s += t2 * r.x1[mid][ch] * t1;
          }
          want += std::abs(r.x2[i][ch] * s) / 6;
        }
        CHECK(mm.at(0, 0, i, j) == doctest::Approx(want).epsilon(1e-9));
      }
  }
}
