// Hand-checkable values of the Synthesizer family (mixers.md §3): every member's logits written
// out as plain loops from its parameters, the skeleton softmax(L + M)·V·W_O against them, the
// fixed buffer of synth-fixed, FD's tiling order, and the mixture weights of synth-mix.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

using Values = std::map<std::string, std::vector<double>>;

// Every parameter and buffer of a module by name, as doubles.
Values values_of(const Module& m) {
  Values out;
  for (const auto& [name, t] : m.named_tensors()) out[name] = t.to_double_vector();
  return out;
}

void set_value(const Module& m, const std::string& name, const std::vector<double>& value) {
  NoGradGuard no_grad;
  for (const auto& [n, t] : m.named_tensors()) {
    if (n != name) continue;
    Tensor target = t;
    REQUIRE(static_cast<int64_t>(value.size()) == target.numel());
    target.copy_(Tensor::from_data(value, target.shape()));
    return;
  }
  FAIL("no tensor named " << name);
}

// A deterministic, non-symmetric filling so that a transposed read would be caught.
std::vector<double> pattern(int64_t count, double scale, double phase) {
  std::vector<double> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = scale * std::sin(0.7 * i + phase) + 0.01 * i;
  return v;
}

struct Dims {
  int64_t d, h, l;
};

// y = W x + b for a Linear stored [out, in] (row-major), one token.
std::vector<double> apply_linear(const Values& v, const std::string& name,
                                 const std::vector<double>& x, int64_t in, int64_t offset) {
  const auto& w = v.at(name + ".weight");
  const auto& b = v.at(name + ".bias");
  int64_t out = static_cast<int64_t>(b.size());
  std::vector<double> y(out);
  for (int64_t o = 0; o < out; ++o) {
    y[o] = b[o];
    for (int64_t e = 0; e < in; ++e) y[o] += w[o * in + e] * x[offset + e];
  }
  return y;
}

// Hand logits, [h][n][n] flattened, of each component for one sequence x [n, d].
std::vector<double> table_logits(const std::vector<double>& r, int64_t n, const Dims& s) {
  std::vector<double> out(s.h * n * n);
  for (int64_t k = 0; k < s.h; ++k)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) out[(k * n + i) * n + j] = r[(k * s.l + i) * s.l + j];
  return out;
}

std::vector<double> dense_logits(const Values& v, const std::vector<double>& x, int64_t n,
                                 const Dims& s) {
  int64_t dh = s.d / s.h;
  std::vector<double> out(s.h * n * n);
  for (int64_t i = 0; i < n; ++i) {
    auto p = apply_linear(v, "w_1", x, s.d, i * s.d);
    for (auto& e : p) e = std::max(e, 0.0);
    for (int64_t k = 0; k < s.h; ++k) {
      std::vector<double> pk(p.begin() + k * dh, p.begin() + (k + 1) * dh);
      auto row = apply_linear(v, "w_2", pk, dh, 0);  // ℓ values
      for (int64_t j = 0; j < n; ++j) out[(k * n + i) * n + j] = row[j];
    }
  }
  return out;
}

std::vector<double> frandom_logits(const Values& v, int64_t n, const Dims& s, int64_t r) {
  const auto& r1 = v.at("R_1");
  const auto& r2 = v.at("R_2");
  std::vector<double> out(s.h * n * n);
  for (int64_t k = 0; k < s.h; ++k)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < r; ++q)
          acc += r1[(k * s.l + i) * r + q] * r2[(k * s.l + j) * r + q];
        out[(k * n + i) * n + j] = acc;
      }
  return out;
}

std::vector<double> fdense_logits(const Values& v, const std::vector<double>& x, int64_t n,
                                  const Dims& s, int64_t a) {
  int64_t b = s.l / a;
  std::vector<double> out(s.h * n * n);
  for (int64_t i = 0; i < n; ++i) {
    auto av = apply_linear(v, "w_a", x, s.d, i * s.d);
    auto bv = apply_linear(v, "w_b", x, s.d, i * s.d);
    for (int64_t k = 0; k < s.h; ++k)
      for (int64_t j = 0; j < n; ++j)
        out[(k * n + i) * n + j] = av[k * a + j / b] * bv[k * b + j % b];
  }
  return out;
}

std::vector<double> dot_logits(const Values& v, const std::vector<double>& x, int64_t n,
                               const Dims& s) {
  int64_t dh = s.d / s.h;
  std::vector<std::vector<double>> q, kk;
  for (int64_t i = 0; i < n; ++i) {
    q.push_back(apply_linear(v, "w_q", x, s.d, i * s.d));
    kk.push_back(apply_linear(v, "w_k", x, s.d, i * s.d));
  }
  std::vector<double> out(s.h * n * n);
  for (int64_t k = 0; k < s.h; ++k)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t t = 0; t < dh; ++t) acc += q[i][k * dh + t] * kk[j][k * dh + t];
        out[(k * n + i) * n + j] = acc / std::sqrt(static_cast<double>(dh));
      }
  return out;
}

// The skeleton by hand: V = X W_Vᵀ + b_V, A_k = softmax(L_k + M) (keys j < len, and j <= i when
// causal; a row with no key is 0), Y = concat_k(A_k V_k) W_Oᵀ + b_O. One sequence x [n, d].
std::vector<double> skeleton(const Values& v, const std::vector<double>& x,
                             const std::vector<double>& logits, int64_t n, const Dims& s,
                             int64_t len, bool causal) {
  int64_t dh = s.d / s.h;
  std::vector<std::vector<double>> val;
  for (int64_t i = 0; i < n; ++i) val.push_back(apply_linear(v, "w_v", x, s.d, i * s.d));
  std::vector<double> y;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> heads(s.d, 0.0);
    for (int64_t k = 0; k < s.h; ++k) {
      std::vector<double> w(n, 0.0);
      double top = -1e300, total = 0;
      for (int64_t j = 0; j < n; ++j)
        if (j < len && (!causal || j <= i)) top = std::max(top, logits[(k * n + i) * n + j]);
      for (int64_t j = 0; j < n; ++j)
        if (j < len && (!causal || j <= i))
          total += w[j] = std::exp(logits[(k * n + i) * n + j] - top);
      for (int64_t j = 0; j < n; ++j) {
        if (total == 0) continue;
        for (int64_t t = 0; t < dh; ++t) heads[k * dh + t] += w[j] / total * val[j][k * dh + t];
      }
    }
    auto row = apply_linear(v, "w_o", heads, s.d, 0);
    y.insert(y.end(), row.begin(), row.end());
  }
  return y;
}

std::shared_ptr<Mixer> build(const std::string& name, const Dims& s, bool causal,
                             std::map<std::string, std::string> options = {}, uint64_t seed = 5) {
  MixerConfig c;
  c.name = name;
  c.dim = s.d;
  c.heads = s.h;
  c.max_len = s.l;
  c.causal = causal;
  c.options = std::move(options);
  c.seed = seed;
  auto m = make_mixer(c);
  m->to(DType::F64);
  m->eval();
  return m;
}

// Gives every bias a nonzero value so that the hand computation checks them too.
void perturb_biases(const Mixer& m) {
  double phase = 0.3;
  for (const auto& [name, t] : m.named_parameters())
    if (name.size() > 5 && name.substr(name.size() - 5) == ".bias")
      set_value(m, name, pattern(t.numel(), 0.2, phase += 0.9));
}

// Runs the mixer on x [B, n, d] (lengths may be empty) and compares each sequence with the
// skeleton applied to the logits `hand(values, x_b)` gives.
void check_against_hand(
    Mixer& m, const Dims& s, int64_t batch, int64_t n, const std::vector<int32_t>& lengths,
    bool causal,
    const std::function<std::vector<double>(const Values&, const std::vector<double>&)>& hand) {
  NoGradGuard no_grad;
  Tensor x = rand64({batch, n, s.d}, 21, false);
  Tensor y = m.forward(x, context_for(x, lengths, causal));
  Values v = values_of(m);
  for (int64_t b = 0; b < batch; ++b) {
    INFO("sequence " << b);
    auto xb = rows_of(x, b, 0, n);
    int64_t len = lengths.empty() ? n : lengths[b];
    auto expected = skeleton(v, xb, hand(v, xb), n, s, len, causal);
    auto got = rows_of(y, b, 0, n);
    // Padded query rows are free (they only have to be finite); compare the valid ones.
    got.resize(len * s.d);
    expected.resize(len * s.d);
    check_close(got, expected, 1e-12);
  }
}

}  // namespace

TEST_CASE("mixer values: synth-random on a 2-token example worked out by hand") {
  // d = h = 1, ℓ = 2: R = [[0, ln 3], [0, 0]], W_V = 1, W_O = 2, b_O = 0.5, x = (1, 3).
  // Row 0: softmax(0, ln 3) = (1/4, 3/4) -> 1/4·1 + 3/4·3 = 2.5 -> 2·2.5 + 0.5 = 5.5.
  // Row 1: (1/2, 1/2) -> 2 -> 4.5. Causal row 0 sees only itself: 1 -> 2.5.
  for (bool causal : {false, true}) {
    auto m = build("synth-random", {1, 1, 2}, causal);
    set_value(*m, "R", {0.0, std::log(3.0), 0.0, 0.0});
    set_value(*m, "w_v.weight", {1.0});
    set_value(*m, "w_v.bias", {0.0});
    set_value(*m, "w_o.weight", {2.0});
    set_value(*m, "w_o.bias", {0.5});
    NoGradGuard no_grad;
    Tensor x = Tensor::from_data(std::vector<double>{1.0, 3.0}, {1, 2, 1});
    auto y = m->forward(x, context_for(x, {}, causal)).to_double_vector();
    check_close(y, {causal ? 2.5 : 5.5, 4.5}, 1e-14);
  }
}

TEST_CASE("mixer values: synth-random with a hand-set R equals softmax(R) V W_O") {
  Dims s{4, 2, 5};
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "plain"));
    auto m = build("synth-random", s, causal);
    set_value(*m, "R", pattern(s.h * s.l * s.l, 1.5, 0.1));
    perturb_biases(*m);
    auto hand = [&](const Values& v, const std::vector<double>&) {
      return table_logits(v.at("R"), 4, s);
    };
    check_against_hand(*m, s, 2, 4, {}, causal, hand);  // N = 4 < ℓ: R sliced to [:4, :4]
    check_against_hand(*m, s, 2, 4, {4, 2}, causal, hand);
  }
}

TEST_CASE("mixer values: synth-dense row with every key masked gives the output bias b_O") {
  Dims s{4, 2, 4};
  auto m = build("synth-dense", s, false);
  perturb_biases(*m);
  NoGradGuard no_grad;
  Tensor x = rand64({1, 3, 4}, 3, false);
  Tensor y = m->forward(x, context_for(x, {0}, false));
  auto bias = values_of(*m).at("w_o.bias");
  for (int64_t i = 0; i < 3; ++i) check_close(rows_of(y, 0, i, i + 1), bias, 1e-14);
}

TEST_CASE("mixer values: synth-dense synthesizes each head from its own channels") {
  Dims s{6, 3, 5};
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "plain"));
    auto m = build("synth-dense", s, causal);
    perturb_biases(*m);
    auto hand = [&](const Values& v, const std::vector<double>& x) {
      return dense_logits(v, x, 4, s);
    };
    check_against_hand(*m, s, 2, 4, {}, causal, hand);
    check_against_hand(*m, s, 2, 4, {3, 4}, causal, hand);
  }
}

TEST_CASE("mixer values: synth-frandom gives every query its own row of R1 R2^T") {
  Dims s{4, 2, 6};
  auto m = build("synth-frandom", s, false, {{"rank", "3"}});
  CHECK(m->named_parameters()[0].second.shape() == Shape{2, 6, 3});
  perturb_biases(*m);
  auto hand = [&](const Values& v, const std::vector<double>&) {
    return frandom_logits(v, 5, s, 3);
  };
  check_against_hand(*m, s, 2, 5, {}, false, hand);
  check_against_hand(*m, s, 2, 5, {5, 3}, false, hand);
  // Initialisation: uniform within ±√(3/r).
  Values v = values_of(*m);
  for (const auto& name : {"R_1", "R_2"})
    for (double e : v.at(name)) CHECK(std::abs(e) <= std::sqrt(3.0 / 3.0));
}

TEST_CASE("mixer values: synth-fdense tiles L(i u*b+v) = A(i u) B(i v)") {
  // d = ℓ = 6, h = 1, a = 2, b = 3. With x = I (token i is the i-th unit vector), W_V = W_O = I
  // and zero biases, the output is the attention matrix itself: Y[i, j] = softmax_j(L[i, j])
  // with A[i, u] = W_A[u, i] + b_A[u] and B[i, v] = W_B[v, i] + b_B[v].
  Dims s{6, 1, 6};
  auto m = build("synth-fdense", s, false, {{"fd-a", "2"}});
  std::vector<double> eye(36, 0.0);
  for (int i = 0; i < 6; ++i) eye[i * 7] = 1.0;
  set_value(*m, "w_v.weight", eye);
  set_value(*m, "w_o.weight", eye);
  auto wa = pattern(12, 1.0, 0.2), ba = std::vector<double>{0.3, -0.4};
  auto wb = pattern(18, 1.2, 1.1), bb = std::vector<double>{-0.2, 0.1, 0.5};
  set_value(*m, "w_a.weight", wa);
  set_value(*m, "w_a.bias", ba);
  set_value(*m, "w_b.weight", wb);
  set_value(*m, "w_b.bias", bb);
  NoGradGuard no_grad;
  Tensor x = Tensor::from_data(eye, {1, 6, 6});
  auto y = m->forward(x, context_for(x, {}, false)).to_double_vector();
  auto row_softmax = [](std::vector<double> l) {
    double top = *std::max_element(l.begin(), l.end()), total = 0;
    for (auto& e : l) total += e = std::exp(e - top);
    for (auto& e : l) e /= total;
    return l;
  };
  for (int i = 0; i < 6; ++i) {
    INFO("row " << i);
    std::vector<double> l(6), other(6);
    for (int j = 0; j < 6; ++j) {
      auto a = [&](int u) { return wa[u * 6 + i] + ba[u]; };
      auto b = [&](int v) { return wb[v * 6 + i] + bb[v]; };
      l[j] = a(j / 3) * b(j % 3);      // A repeated element-wise, B tiled
      other[j] = a(j % 2) * b(j / 2);  // the other reading, which the test must tell apart
    }
    std::vector<double> got(y.begin() + i * 6, y.begin() + (i + 1) * 6);
    check_close(got, row_softmax(l), 1e-13);
    double gap = 0;
    auto alt = row_softmax(other);
    for (int j = 0; j < 6; ++j) gap = std::max(gap, std::abs(alt[j] - got[j]));
    CHECK(gap > 1e-3);
  }
}

TEST_CASE("mixer values: synth-fdense against the hand logits with heads and sliced columns") {
  Dims s{6, 2, 8};  // default a = 2 (the divisor of 8 nearest √8), b = 4
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "plain"));
    auto m = build("synth-fdense", s, causal);
    perturb_biases(*m);
    auto hand = [&](const Values& v, const std::vector<double>& x) {
      return fdense_logits(v, x, 6, s, 2);
    };
    check_against_hand(*m, s, 2, 6, {}, causal, hand);
    check_against_hand(*m, s, 2, 6, {6, 4}, causal, hand);
  }
}

TEST_CASE(
    "mixer values: synth-fdense default a is the divisor of max_len nearest its square root") {
  for (auto [l_bound, a] : std::vector<std::pair<int64_t, int64_t>>{
           {8, 2}, {10, 2}, {12, 3}, {16, 4}, {7, 1}, {64, 8}, {50, 5}}) {
    const int64_t l = l_bound;  // INFO captures it in a lambda: clang 14 refuses a binding there
    INFO("ℓ = " << l);
    auto m = build("synth-fdense", {4, 2, l}, false);
    for (const auto& [name, t] : m->named_parameters()) {
      if (name == "w_a.weight") CHECK(t.shape() == Shape{2 * a, 4});
      if (name == "w_b.weight") CHECK(t.shape() == Shape{2 * (l / a), 4});
    }
  }
  auto automatic = build("synth-fdense", {4, 2, 8}, false, {{"fd-a", "auto"}});
  CHECK(automatic->parameter_count() == 2 * (2 + 4) * (4 + 1) + 2 * 16 + 2 * 4);
  auto explicit_a = build("synth-fdense", {4, 2, 8}, false, {{"fd-a", "4"}});  // b = 2
  CHECK(explicit_a->named_parameters()[0].second.shape() == Shape{8, 4});
  CHECK(explicit_a->named_parameters()[2].second.shape() == Shape{4, 4});
  CHECK_THROWS_WITH_AS(build("synth-fdense", {4, 2, 8}, false, {{"fd-a", "3"}}),
                       doctest::Contains("divisor of max_len"), Error);
}

TEST_CASE("mixer values: synth-fixed keeps R in a buffer that training never changes") {
  Dims s{4, 2, 5};
  auto m = build("synth-fixed", s, false);
  for (const auto& [name, t] : m->named_parameters()) CHECK(name.find("R") == std::string::npos);
  CHECK(m->parameter_count() == 2 * 4 * 4 + 2 * 4);
  auto buffers = m->named_buffers();
  REQUIRE(buffers.size() == 1);
  CHECK(buffers[0].first == "R_fix");
  Tensor r = buffers[0].second;
  CHECK(r.shape() == Shape{2, 5, 5});
  CHECK(r.dtype() == DType::F64);  // moved by to() like the parameters
  CHECK(!r.requires_grad());
  auto before = r.to_double_vector();
  for (double e : before) CHECK(std::abs(e) <= std::sqrt(3.0 / 5.0));
  // Drawn from the seed: the same seed gives the same buffer, another seed another one.
  CHECK(build("synth-fixed", s, false)->named_buffers()[0].second.to_double_vector() == before);
  CHECK(build("synth-fixed", s, false, {}, 6)->named_buffers()[0].second.to_double_vector() !=
        before);

  // The skeleton with the buffer's logits.
  perturb_biases(*m);
  check_against_hand(*m, s, 2, 5, {5, 2}, false, [&](const Values& v, const std::vector<double>&) {
    return table_logits(v.at("R_fix"), 5, s);
  });

  // A backward pass and a manual SGD step move the parameters, not the buffer.
  Tensor x = rand64({2, 5, 4}, 4, false);
  Tensor loss = sum(mul(m->forward(x, context_for(x, {5, 3}, false)), x));
  loss.backward();
  CHECK(!r.grad().defined());
  auto w_o_before = values_of(*m).at("w_o.weight");
  {
    NoGradGuard no_grad;
    for (auto& p : m->parameters()) {
      REQUIRE(p.grad().defined());
      p.copy_(sub(p, mul(p.grad(), 0.1)));
    }
  }
  CHECK(values_of(*m).at("w_o.weight") != w_o_before);
  CHECK(r.to_double_vector() == before);
}

TEST_CASE(
    "mixer values: synth-mix weights alpha start uniform and mix the logits of every component") {
  Dims s{6, 2, 6};
  const std::string name = "synth-mix:R+Fix+D+FR+FD+V";
  auto m = build(name, s, false, {{"rank", "2"}});
  auto v0 = values_of(*m);
  REQUIRE(v0.count("theta"));
  CHECK(v0.at("theta") == std::vector<double>(6, 0.0));  // α = softmax(0) = 1/6 each
  CHECK(m->named_buffers().size() == 1);
  perturb_biases(*m);
  const int64_t n = 5;
  auto mixed = [&](const Values& v, const std::vector<double>& x) {
    std::vector<std::vector<double>> parts = {
        table_logits(v.at("R"), n, s), table_logits(v.at("R_fix"), n, s), dense_logits(v, x, n, s),
        frandom_logits(v, n, s, 2),    fdense_logits(v, x, n, s, 2),      dot_logits(v, x, n, s)};
    const auto& theta = v.at("theta");
    double total = 0;
    for (double t : theta) total += std::exp(t);
    std::vector<double> out(parts[0].size(), 0.0);
    for (size_t c = 0; c < parts.size(); ++c)
      for (size_t e = 0; e < out.size(); ++e) out[e] += std::exp(theta[c]) / total * parts[c][e];
    return out;
  };
  check_against_hand(*m, s, 2, n, {}, false, mixed);
  check_against_hand(*m, s, 2, n, {5, 3}, false, mixed);
  // Trained weights: α = softmax(θ) for any θ.
  set_value(*m, "theta", {0.5, -1.0, 2.0, 0.1, -0.3, 1.2});
  check_against_hand(*m, s, 2, n, {5, 3}, false, mixed);

  auto causal = build(name, s, true, {{"rank", "2"}});
  perturb_biases(*causal);
  check_against_hand(*causal, s, 2, n, {5, 4}, true, mixed);
}

TEST_CASE("mixer values: synth-mix:R+V is the random plus dot-product mixture of the paper") {
  Dims s{4, 2, 4};
  auto m = build("synth-mix:R+V", s, false);
  CHECK(m->parameter_count() == 2 * 16 + 2 * 4 + 2 + 2 * 4 * 4 + (2 * 16 + 2 * 4));
  perturb_biases(*m);
  check_against_hand(*m, s, 1, 4, {}, false, [&](const Values& v, const std::vector<double>& x) {
    auto r = table_logits(v.at("R"), 4, s), q = dot_logits(v, x, 4, s);
    for (size_t e = 0; e < r.size(); ++e) r[e] = 0.5 * r[e] + 0.5 * q[e];
    return r;
  });
}

TEST_CASE("mixer values: a mix with V takes the attention core with a bias, as the formula") {
  // forward() gives a mix with a V component to the attention core: Q', K and V from one stacked
  // product, the other components' logits as the scores' bias. Under a mixing capture it runs the
  // formula (logits summed, then softmax and the weighted sum). Outputs and every gradient must
  // agree: padded and causal; the other components shared by the batch (R, Fix), per example
  // (D, FD), several, or none. Without V (R+D+FD) the summed logits, a heads view of a
  // [B, N, h, N] buffer, go to the synthesized core: the same check.
  for (const char* name :
       {"synth-mix:R+V", "synth-mix:D+V", "synth-mix:V+Fix+FD", "synth-mix:V", "synth-mix:R+D+FD"})
    for (bool causal : {false, true}) {
      INFO(std::string(name) << (causal ? " causal" : " padded"));
      MixerConfig c = small_config(name, causal);
      c.max_len = 6;
      auto m = build64(c);
      {  // α away from uniform, so each component's weight is checked
        NoGradGuard no_grad;
        Tensor theta = param(*m, "theta");
        std::vector<double> t(static_cast<size_t>(theta.numel()));
        for (size_t i = 0; i < t.size(); ++i) t[i] = 0.3 * static_cast<double>(i) - 0.2;
        theta.copy_(Tensor::from_data(t, theta.shape()));
      }
      Tensor x = rand64({2, 6, 8}, 51);
      Tensor w = rand64({2, 6, 8}, 52, false);
      MixerContext ctx =
          context_for(x, causal ? std::vector<int32_t>{} : std::vector<int32_t>{6, 4}, causal);
      auto fused = output_and_gradients(*m, x, w, ctx, false);
      auto formula = output_and_gradients(*m, x, w, ctx, true);
      REQUIRE(fused.size() == formula.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO("result " << i);
        check_close(fused[i], formula[i], 1e-12);
      }
    }
}

TEST_CASE("mixer values: synth-mix names its valid components on a bad name") {
  for (const char* bad : {"synth-mix:R+X", "synth-mix:R+R", "synth-mix:", "synth-mix",
                          "synth-mix:R++V", "synth-mix:r"}) {
    INFO(bad);
    CHECK_THROWS_WITH_AS(make_mixer(small_config(bad)), doctest::Contains("R, Fix, D, FR, FD, V"),
                         Error);
  }
  CHECK_THROWS_WITH_AS(make_mixer(small_config("synth-mix:R+Fix+R")),
                       doctest::Contains("appears twice"), Error);
  CHECK_THROWS_WITH_AS(make_mixer(small_config("synth-mix:R+Q")), doctest::Contains("'Q'"), Error);
  MixerConfig c = small_config("synth-frandom");
  c.options.emplace("rank", "0");
  CHECK_THROWS_WITH_AS(make_mixer(c), doctest::Contains("rank"), Error);
}

TEST_CASE("mixer values: synthesizer decoding reuses rows and stops at max_len") {
  Dims s{4, 2, 3};
  auto m = build("synth-mix:D+V", s, true);
  NoGradGuard no_grad;
  Tensor x = rand64({1, 3, 4}, 30, false);
  MixerContext ctx = context_for(x, {}, true);
  auto cache = m->new_cache();
  for (int64_t t = 0; t < 3; ++t) m->step(contiguous(narrow(x, 1, t, 1)), *cache, ctx);
  CHECK(cache->position == 3);
  CHECK_THROWS_WITH_AS(m->step(contiguous(narrow(x, 1, 0, 1)), *cache, ctx),
                       doctest::Contains("max_len"), Error);
}
