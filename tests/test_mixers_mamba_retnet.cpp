// mamba (mixers.md §17) and retnet (§19) against their equations written as plain float64 loops
// (nn/mixers/mamba.cpp, retnet.cpp hold the code under test), and their incremental decoding (the
// recurrences) against the parallel form over whole sequences, in float64 to 1e-10 and in
// float32 to its rounding.
#include <cmath>
#include <optional>

#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

MixerConfig sized(const std::string& name, bool causal, int64_t d = 16, int64_t heads = 2) {
  MixerConfig c = small_config(name, causal);
  c.dim = d;
  c.heads = heads;
  c.max_len = 32;
  return c;
}

std::vector<double> param_values(const Mixer& m, const std::string& name) {
  return param(m, name).to_double_vector();
}

double sigmoid_of(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu_of(double x) { return x * sigmoid_of(x); }
double softplus_of(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

// y = x Wᵀ (+ b) for one row: W [out, in] row-major.
std::vector<double> affine(const std::vector<double>& w, const double* x, int64_t in, int64_t out,
                           const std::vector<double>* b = nullptr) {
  std::vector<double> y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double acc = b ? (*b)[o] : 0.0;
    for (int64_t i = 0; i < in; ++i) acc += w[o * in + i] * x[i];
    y[o] = acc;
  }
  return y;
}

// mamba's §17 for one sequence x [len, d] of which the first `valid` rows are real.
std::vector<double> mamba_by_loops(const Mixer& m, const std::vector<double>& x, int64_t len,
                                   int64_t valid, int64_t d, int64_t e, int64_t n, int64_t k,
                                   int64_t r) {
  auto w_in = param_values(m, "w_in.weight"), w_conv = param_values(m, "conv_weight"),
       b_conv = param_values(m, "conv_bias"), w_x = param_values(m, "w_x.weight"),
       w_dt = param_values(m, "w_dt.weight"), b_dt = param_values(m, "w_dt.bias"),
       a_log = param_values(m, "A_log"), dd = param_values(m, "D"),
       w_out = param_values(m, "w_out.weight");
  std::vector<std::vector<double>> u(len), z(len);
  for (int64_t i = 0; i < len; ++i) {
    auto uz = affine(w_in, &x[i * d], d, 2 * e);
    u[i].assign(uz.begin(), uz.begin() + e);
    z[i].assign(uz.begin() + e, uz.end());
    if (i >= valid) std::fill(u[i].begin(), u[i].end(), 0.0);
  }
  std::vector<double> h(static_cast<size_t>(e * n), 0.0), out(static_cast<size_t>(len * d), 0.0);
  for (int64_t i = 0; i < valid; ++i) {
    std::vector<double> uc(static_cast<size_t>(e));
    for (int64_t c = 0; c < e; ++c) {
      double acc = b_conv[c];
      for (int64_t t = 0; t < k; ++t) {
        int64_t src = i - k + 1 + t;
        if (src >= 0) acc += w_conv[c * k + t] * u[src][c];
      }
      uc[c] = silu_of(acc);
    }
    auto sel = affine(w_x, uc.data(), e, r + 2 * n);
    auto dt_pre = affine(w_dt, sel.data(), r, e, &b_dt);
    std::vector<double> gated(static_cast<size_t>(e));
    for (int64_t c = 0; c < e; ++c) {
      double delta = softplus_of(dt_pre[c]), y = dd[c] * uc[c];
      for (int64_t s = 0; s < n; ++s) {
        double a = -std::exp(a_log[c * n + s]);
        h[c * n + s] = std::exp(delta * a) * h[c * n + s] + delta * sel[r + s] * uc[c];
        y += sel[r + n + s] * h[c * n + s];
      }
      gated[c] = y * silu_of(z[i][c]);
    }
    auto row = affine(w_out, gated.data(), e, d);
    std::copy(row.begin(), row.end(), out.begin() + i * d);
  }
  return out;
}

// retnet's §19 for one sequence (positions from 0, two-sided decay unless causal).
std::vector<double> retnet_by_loops(const Mixer& m, const std::vector<double>& x, int64_t len,
                                    int64_t valid, int64_t d, int64_t heads, bool causal) {
  auto wq = param_values(m, "w_q.weight"), wk = param_values(m, "w_k.weight"),
       wv = param_values(m, "w_v.weight"), wg = param_values(m, "w_g.weight"),
       wo = param_values(m, "w_o.weight"), gain = param_values(m, "ln.weight"),
       bias = param_values(m, "ln.bias");
  const int64_t dh = d / heads;
  std::vector<std::vector<double>> q(len), k(len), v(len), g(len);
  for (int64_t i = 0; i < len; ++i) {
    q[i] = affine(wq, &x[i * d], d, d);
    k[i] = affine(wk, &x[i * d], d, d);
    v[i] = affine(wv, &x[i * d], d, d);
    g[i] = affine(wg, &x[i * d], d, d);
    for (auto* t : {&q[i], &k[i]})
      for (int64_t hd = 0; hd < heads; ++hd)
        for (int64_t j = 0; j < dh / 2; ++j) {
          double angle = double(i) * std::pow(10000.0, -2.0 * double(j) / double(dh));
          double& a = (*t)[hd * dh + 2 * j];
          double& b = (*t)[hd * dh + 2 * j + 1];
          double a0 = a, b0 = b;
          a = a0 * std::cos(angle) - b0 * std::sin(angle);
          b = a0 * std::sin(angle) + b0 * std::cos(angle);
        }
    for (auto& kv : k[i]) kv /= std::sqrt(double(dh));
  }
  std::vector<double> out(static_cast<size_t>(len * d), 0.0);
  for (int64_t i = 0; i < valid; ++i) {
    std::vector<double> o(static_cast<size_t>(d));
    for (int64_t hd = 0; hd < heads; ++hd) {
      double gamma = 1.0 - std::pow(2.0, -5.0 - double(hd));
      std::vector<double> ret(static_cast<size_t>(dh), 0.0);
      for (int64_t j = 0; j < valid; ++j) {
        if (causal && j > i) continue;
        double score = 0;
        for (int64_t c = 0; c < dh; ++c) score += q[i][hd * dh + c] * k[j][hd * dh + c];
        score *= std::pow(gamma, double(std::abs(i - j)));
        for (int64_t c = 0; c < dh; ++c) ret[c] += score * v[j][hd * dh + c];
      }
      double mean = 0, var = 0;
      for (double r : ret) mean += r / double(dh);
      for (double r : ret) var += (r - mean) * (r - mean) / double(dh);
      for (int64_t c = 0; c < dh; ++c)
        o[hd * dh + c] =
            (ret[c] - mean) / std::sqrt(var + 1e-5) * gain[hd * dh + c] + bias[hd * dh + c];
    }
    for (int64_t c = 0; c < d; ++c) o[c] *= silu_of(g[i][c]);
    auto row = affine(wo, o.data(), d, d);
    std::copy(row.begin(), row.end(), out.begin() + i * d);
  }
  return out;
}

// Perturbs every parameter (biases and norms start at 0 or 1, which would hide mistakes).
void perturb(Mixer& m, uint64_t seed) {
  NoGradGuard no_grad;
  Generator gen(seed);
  for (auto& p : m.parameters()) {
    Tensor noise = Tensor::uniform(p.shape(), -0.2, 0.2, gen, p.dtype());
    assign_in_place(p, add(p, noise));
  }
}

// step() position by position equals forward() of the causal instance at every position.
void check_recurrence(const std::string& name, DType dtype, double tol) {
  INFO(name << " " << dtype_name(dtype));
  auto m = make_mixer(sized(name, true));
  perturb(*m, 5);
  m->to(dtype);
  m->eval();
  NoGradGuard no_grad;
  Generator gen(17);
  const int64_t len = 12;
  Tensor x = Tensor::uniform({2, len, 16}, -1, 1, gen, dtype);
  Tensor full = m->forward(x, context_for(x, {}, true));
  auto cache = m->new_cache();
  for (int64_t t = 0; t < len; ++t) {
    Tensor y_t = m->step(contiguous(narrow(x, 1, t, 1)), *cache, MixerContext{});
    for (int64_t b = 0; b < 2; ++b)
      check_close(rows_of(y_t, b, 0, 1), rows_of(full, b, t, t + 1), tol);
  }
}

}  // namespace

TEST_CASE("mamba: the forward equals §17 written as loops, padded, causal or not") {
  for (bool causal : {false, true}) {
    auto m = build64(sized("mamba", causal));
    perturb(*m, 3);
    NoGradGuard no_grad;
    Tensor x = rand64({2, 7, 16}, 21, false);
    Tensor y = m->forward(x, context_for(x, {7, 4}, causal));
    auto xv = x.to_double_vector(), yv = y.to_double_vector();
    for (int64_t b = 0; b < 2; ++b) {
      INFO("item " << b << (causal ? " causal" : ""));
      std::vector<double> xb(xv.begin() + b * 7 * 16, xv.begin() + (b + 1) * 7 * 16);
      std::vector<double> yb(yv.begin() + b * 7 * 16, yv.begin() + (b + 1) * 7 * 16);
      // d = 16: E = 32, n = 16, k = 4, R = ⌈16/16⌉ = 1.
      check_close(yb, mamba_by_loops(*m, xb, 7, b == 0 ? 7 : 4, 16, 32, 16, 4, 1), 1e-10);
    }
  }
}

TEST_CASE("mamba: options set the sizes (expand, state, conv, dt-rank)") {
  MixerConfig c = sized("mamba", true);
  c.options = {{"expand", "1"}, {"state", "3"}, {"conv", "2"}, {"dt-rank", "5"}};
  auto m = build64(c);
  CHECK(param(*m, "A_log").shape() == Shape{16, 3});
  CHECK(param(*m, "conv_weight").shape() == Shape{16, 2});
  CHECK(param(*m, "w_dt.weight").shape() == Shape{16, 5});
  CHECK(m->parameter_count() == 3 * 16 * 16 + 16 * (2 + 2 * 5 + 3 * 3 + 3));
  perturb(*m, 4);
  NoGradGuard no_grad;
  Tensor x = rand64({1, 6, 16}, 22, false);
  Tensor y = m->forward(x, context_for(x, {}, true));
  check_close(y.to_double_vector(), mamba_by_loops(*m, x.to_double_vector(), 6, 6, 16, 16, 3, 2, 5),
              1e-10);
}

TEST_CASE("retnet: the parallel form equals §19 written as loops, padded, causal or not") {
  for (bool causal : {false, true}) {
    auto m = build64(sized("retnet", causal, 16, 4));
    perturb(*m, 6);
    NoGradGuard no_grad;
    Tensor x = rand64({2, 7, 16}, 23, false);
    Tensor y = m->forward(x, context_for(x, {7, 5}, causal));
    auto xv = x.to_double_vector(), yv = y.to_double_vector();
    for (int64_t b = 0; b < 2; ++b) {
      INFO("item " << b << (causal ? " causal" : ""));
      std::vector<double> xb(xv.begin() + b * 7 * 16, xv.begin() + (b + 1) * 7 * 16);
      std::vector<double> yb(yv.begin() + b * 7 * 16, yv.begin() + (b + 1) * 7 * 16);
      check_close(yb, retnet_by_loops(*m, xb, 7, b == 0 ? 7 : 5, 16, 4, causal), 1e-10);
    }
  }
}

TEST_CASE("mamba and retnet: the recurrence equals the parallel form over a whole sequence") {
  for (const char* name : {"mamba", "retnet"}) {
    check_recurrence(name, DType::F64, 1e-10);
    check_recurrence(name, DType::F32, 2e-5);
  }
}

TEST_CASE("mamba and retnet: the decoding state does not grow with the prefix") {
  for (const char* name : {"mamba", "retnet"}) {
    INFO(name);
    auto m = build64(sized(name, true));
    NoGradGuard no_grad;
    auto cache = m->new_cache();
    std::vector<Shape> first;
    for (int64_t t = 0; t < 5; ++t) {
      m->step(rand64({1, 1, 16}, 30 + t, false), *cache, MixerContext{});
      std::vector<Shape> shapes;
      for (Tensor* s : cache->batch_tensors()) shapes.push_back(s->shape());
      if (t == 0) first = shapes;
      CHECK(shapes == first);
    }
  }
}

TEST_CASE("mamba and retnet: inspect records the matrices the spec names") {
  for (const char* name : {"mamba", "retnet"}) {
    INFO(name);
    auto m = build64(sized(name, false));
    perturb(*m, 8);
    NoGradGuard no_grad;
    Tensor x = rand64({2, 6, 16}, 24, false);
    MixingRecorder recorder(*m);
    m->forward(x, context_for(x, {6, 4}, false));
    REQUIRE(recorder.matrices().size() == 1);
    const MixingMatrix& a = recorder.matrices()[0];
    CHECK(a.n_rows() == 6);
    CHECK(a.n_cols() == 6);
    bool negative = false, above = false;
    for (int64_t h = 0; h < a.heads(); ++h)
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t j = 0; j < 6; ++j) {
          negative = negative || a.at(0, h, i, j) < 0;
          above = above || (j > i && a.at(0, h, i, j) != 0);
          if (j >= 4) CHECK(a.at(1, h, i, j) == 0);  // invalid inputs reach nothing
        }
    if (std::string(name) == "mamba") {
      CHECK(a.heads() == 1);
      CHECK_FALSE(above);  // left to right even in an encoder
    } else {
      CHECK(a.heads() == 2);
      CHECK(above);     // two-sided decay in an encoder
      CHECK(negative);  // signed scores
    }
  }
}

// With one channel (d = 1, expand 1: E = 1) the recorded implicit attention is exactly the map
// the scan applies: Σ_j α[i, j] u_j = y_i − D u_i, with u (after the convolution) and y (before
// the gate) computed here as §17 writes them.
TEST_CASE("mamba: the implicit attention it records is the matrix its scan applies") {
  MixerConfig c = small_config("mamba", false);
  c.dim = 1;
  c.heads = 1;
  c.options = {{"expand", "1"}, {"state", "5"}, {"conv", "3"}};
  auto m = build64(c);
  perturb(*m, 12);
  NoGradGuard no_grad;
  const int64_t len = 7, n = 5, k = 3;
  Tensor x = rand64({1, len, 1}, 25, false);
  MixingRecorder recorder(*m);
  m->forward(x, context_for(x, {}, false));
  REQUIRE(recorder.matrices().size() == 1);
  const MixingMatrix& alpha = recorder.matrices()[0];
  auto xv = x.to_double_vector();
  auto w_in = param_values(*m, "w_in.weight"), w_conv = param_values(*m, "conv_weight"),
       b_conv = param_values(*m, "conv_bias"), w_x = param_values(*m, "w_x.weight"),
       w_dt = param_values(*m, "w_dt.weight"), b_dt = param_values(*m, "w_dt.bias"),
       a_log = param_values(*m, "A_log");
  // y here is Σ_k C_i[k] h_i[k], the scan's output without its D u_i term.
  std::vector<double> pre(len), u(len), y(len), h(n, 0.0);
  for (int64_t i = 0; i < len; ++i) pre[i] = w_in[0] * xv[i];
  for (int64_t i = 0; i < len; ++i) {
    double acc = b_conv[0];
    for (int64_t t = 0; t < k; ++t)
      if (i - k + 1 + t >= 0) acc += w_conv[t] * pre[i - k + 1 + t];
    u[i] = silu_of(acc);
    auto sel = affine(w_x, &u[i], 1, 1 + 2 * n);
    double delta = softplus_of(w_dt[0] * sel[0] + b_dt[0]);
    y[i] = 0;
    for (int64_t s = 0; s < n; ++s) {
      h[s] = std::exp(-std::exp(a_log[s]) * delta) * h[s] + delta * sel[1 + s] * u[i];
      y[i] += sel[1 + n + s] * h[s];
    }
  }
  for (int64_t i = 0; i < len; ++i) {
    INFO("row " << i);
    double mixed = 0;
    for (int64_t j = 0; j < len; ++j) mixed += alpha.at(0, 0, i, j) * u[j];
    CHECK(std::abs(mixed - y[i]) <= 1e-10 * (1 + std::abs(y[i])));
  }
}

TEST_CASE("retnet: an odd head width is refused, naming d and h") {
  MixerConfig c = small_config("retnet", true);
  c.dim = 6;
  c.heads = 2;
  CHECK_THROWS_WITH_AS(make_mixer(c), doctest::Contains("d/h = 3 must be even"), MixerSpecError);
  CHECK_THROWS_WITH_AS(make_mixer(c), doctest::Contains("d = 6, h = 2"), MixerSpecError);
}
