// Optimizers (train/optim/optimizer.h) against updates computed by hand here, and the gradient
// utilities (train/optim/grad_utils.h): norm, clipping, accumulation over micro-batches.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "nn/layers.h"
#include "train/optim/grad_utils.h"
#include "train/optim/optimizer.h"

using namespace mixlab;

namespace {

using Vec = std::vector<double>;

Tensor param_of(const Vec& values) {
  Tensor t = Tensor::from_data(std::vector<float>(values.begin(), values.end()),
                               {static_cast<int64_t>(values.size())});
  t.set_requires_grad(true);
  return t;
}

void set_grad(const Tensor& p, const Vec& g) {
  p.set_grad(Tensor::from_data(std::vector<float>(g.begin(), g.end()), p.shape()));
}

// The float32 values the kernel starts from, widened: the reference must see them too.
Vec as_f32(const Vec& v) {
  Vec out;
  for (double x : v) out.push_back(static_cast<float>(x));
  return out;
}

void check_near(const Tensor& t, const Vec& expected, double tol = 1e-6) {
  Vec actual = t.to_double_vector();
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK(std::abs(actual[i] - expected[i]) <= tol * (1 + std::abs(expected[i])));
  }
}

// ---- reference rules, written out from the papers / PyTorch docs ----
struct AdamRef {
  double lr, b1, b2, eps, wd;
  bool decoupled;
  Vec m, v;
  int t = 0;
  void step(Vec& p, const Vec& g_in) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      double g = g_in[i];
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double m_hat = m[i] / (1 - std::pow(b1, t));
      double v_hat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

struct SgdRef {
  double lr, mu, damp, wd;
  bool nesterov;
  Vec buf;
  void step(Vec& p, const Vec& g_in) {
    bool first = buf.empty();
    if (first) buf.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g_in[i] + wd * p[i];
      if (mu != 0) {
        buf[i] = first ? d : mu * buf[i] + (1 - damp) * d;
        d = nesterov ? d + mu * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  }
};

const Vec kP0 = {0.5, -1.25, 2.0, 0.0, -0.3};
const Vec kG1 = {0.1, -0.2, 0.3, 0.05, -1.5};
const Vec kG2 = {-0.4, 0.25, 0.3, -0.01, 0.7};

void run_adam(bool decoupled) {
  Tensor p = param_of(kP0);
  ParamGroup group{{p}, 0.1};
  AdamOptions options{0.01, 0.9, 0.999, 1e-8};
  std::unique_ptr<Optimizer> opt;
  if (decoupled)
    opt = std::make_unique<AdamW>(std::vector<ParamGroup>{group}, options);
  else
    opt = std::make_unique<Adam>(std::vector<ParamGroup>{group}, options);
  CHECK(opt->type_name() == (decoupled ? "AdamW" : "Adam"));

  AdamRef ref{0.01, 0.9, 0.999, 1e-8, 0.1, decoupled, {}, {}};
  Vec expected = as_f32(kP0);
  for (const Vec& g : {kG1, kG2}) {
    set_grad(p, g);
    opt->step();
    ref.step(expected, as_f32(g));
    check_near(p, expected);
  }
  // The moments are there too, under the parameter's name.
  auto state = opt->state_tensors();
  REQUIRE(state.size() == 2);
  CHECK(state[0].first == "0.0.exp_avg");
  CHECK(state[1].first == "0.0.exp_avg_sq");
  check_near(state[0].second, ref.m);
  check_near(state[1].second, ref.v);
}

void run_sgd(SgdOptions options, double wd) {
  Tensor p = param_of(kP0);
  Sgd opt({ParamGroup{{p}, wd}}, options);
  SgdRef ref{options.lr, options.momentum, options.dampening, wd, options.nesterov, {}};
  Vec expected = as_f32(kP0);
  for (const Vec& g : {kG1, kG2, kG1}) {
    set_grad(p, g);
    opt.step();
    ref.step(expected, as_f32(g));
    check_near(p, expected);
  }
}

}  // namespace

TEST_CASE("optim: Adam two steps match the hand computation with L2 decay") { run_adam(false); }

TEST_CASE("optim: AdamW two steps match the hand computation with decoupled decay") {
  run_adam(true);
}

TEST_CASE("optim: SGD variants match the hand computation") {
  SUBCASE("plain") { run_sgd({0.1, 0.0, 0.0, false}, 0.0); }
  SUBCASE("plain with weight decay") { run_sgd({0.1, 0.0, 0.0, false}, 0.05); }
  SUBCASE("momentum with dampening and decay") { run_sgd({0.1, 0.9, 0.2, false}, 0.01); }
  SUBCASE("nesterov") { run_sgd({0.05, 0.9, 0.0, true}, 0.01); }
}

TEST_CASE("optim: SGD refuses nesterov without momentum or with dampening") {
  Tensor p = param_of(kP0);
  CHECK_THROWS_AS(Sgd({ParamGroup{{p}}}, SgdOptions{0.1, 0.0, 0.0, true}), Error);
  CHECK_THROWS_AS(Sgd({ParamGroup{{p}}}, SgdOptions{0.1, 0.9, 0.1, true}), Error);
}

TEST_CASE("optim: Adam bias correction makes the first step lr times the gradient sign") {
  // After one step m̂ = g and v̂ = g², so the update is lr·g/(|g| + eps) ≈ ±lr whatever |g| is:
  // without bias correction it would be lr·0.1g/(sqrt(0.001)|g|) ≈ 3.16·lr.
  Tensor p = param_of({1.0, 1.0, 1.0, 1.0});
  Adam opt({ParamGroup{{p}}}, AdamOptions{0.01, 0.9, 0.999, 1e-12});
  set_grad(p, {1e-3, -5.0, 200.0, -0.02});
  opt.step();
  check_near(p, {0.99, 1.01, 0.99, 1.01});
  // The second step with the same gradient: m̂ = g and v̂ = g² again, so another ±lr.
  set_grad(p, {1e-3, -5.0, 200.0, -0.02});
  opt.step();
  check_near(p, {0.98, 1.02, 0.98, 1.02});
}

TEST_CASE("optim: param groups apply their own weight decay and lr scale") {
  // Zero gradients: AdamW's moment part is 0/(0 + eps) = 0, so only the decay moves p.
  Tensor a = param_of({2.0, -4.0});
  Tensor b = param_of({2.0, -4.0});
  Tensor c = param_of({2.0, -4.0});
  ParamGroup ga{{a}, 0.5};
  ParamGroup gb{{b}, 0.0};
  ParamGroup gc{{c}, 0.5, 0.25};
  AdamW opt({ga, gb, gc}, AdamOptions{0.1, 0.9, 0.999, 1e-8});
  for (const Tensor& t : {a, b, c}) set_grad(t, {0.0, 0.0});
  opt.step();
  check_near(a, {2.0 * (1 - 0.1 * 0.5), -4.0 * (1 - 0.1 * 0.5)});
  check_near(b, {2.0, -4.0});
  check_near(c, {2.0 * (1 - 0.025 * 0.5), -4.0 * (1 - 0.025 * 0.5)});
  CHECK(opt.param_names() == std::vector<std::string>{"0.0", "1.0", "2.0"});
}

TEST_CASE("optim: parameters without a gradient are untouched and keep no state") {
  Tensor with = param_of({1.0, 2.0});
  Tensor without = param_of({3.0, 4.0});
  AdamW opt({ParamGroup{{with, without}, 0.1}}, AdamOptions{});
  set_grad(with, {0.5, -0.5});
  opt.step();
  opt.step();  // still has its old gradient: a second real step
  CHECK(without.to_double_vector() == Vec{3.0, 4.0});
  CHECK_FALSE(without.grad().defined());
  auto state = opt.state_tensors();
  REQUIRE(state.size() == 2);  // exp_avg and exp_avg_sq of "0.0" only
  CHECK(state[0].first == "0.0.exp_avg");
  CHECK(opt.state_json().at("param_steps").size() == 1);
  CHECK(opt.steps_taken() == 2);

  // When `without` gets a gradient its own step count starts at 1: bias-corrected first step.
  set_grad(without, {2.0, -3.0});
  with.zero_grad();
  opt.step();
  AdamRef ref{1e-3, 0.9, 0.999, 1e-8, 0.1, true, {}, {}};
  Vec expected = {3.0, 4.0};
  ref.step(expected, {2.0, -3.0});
  check_near(without, expected);
}

TEST_CASE("optim: step records no graph and keeps parameters leaves") {
  Tensor p = param_of(kP0);
  Tensor x = param_of(kG1);
  sum(mul(p, x)).backward();
  AdamW opt({ParamGroup{{p}, 0.01}}, AdamOptions{});
  opt.step();
  CHECK(p.is_leaf());
  CHECK(p.requires_grad());
  for (const auto& [name, t] : opt.state_tensors()) {
    CHECK(t.is_leaf());
    CHECK_FALSE(t.requires_grad());
  }
  opt.zero_grad();
  CHECK_FALSE(p.grad().defined());
}

TEST_CASE("optim: gradient shape or dtype mismatch is an error naming the parameter") {
  Tensor p = param_of(kP0);
  Sgd opt({named_group({{"layer.weight", p}})}, SgdOptions{});
  p.set_grad(Tensor::zeros({2}));
  try {
    opt.step();
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("layer.weight") != std::string::npos);
  }
  p.set_grad(Tensor::zeros({5}, DType::F64));
  CHECK_THROWS_AS(opt.step(), Error);

  // Checked before anything moves: a good first parameter is not stepped either.
  Tensor good = param_of(kP0), bad = param_of(kP0);
  Sgd two({named_group({{"good", good}, {"bad", bad}})}, SgdOptions{0.1});
  set_grad(good, kG1);
  bad.set_grad(Tensor::zeros({3}));
  CHECK_THROWS_AS(two.step(), Error);
  CHECK(good.to_double_vector() == as_f32(kP0));
  CHECK(two.steps_taken() == 0);
}

TEST_CASE("optim: the same tensor twice or repeated names are refused") {
  Tensor p = param_of(kP0);
  CHECK_THROWS_AS(Sgd({ParamGroup{{p}}, ParamGroup{{p}}}, SgdOptions{}), Error);
  Tensor q = param_of(kP0);
  CHECK_THROWS_AS(Sgd({named_group({{"w", p}, {"w", q}})}, SgdOptions{}), Error);
}

TEST_CASE("optim: param_groups decays matrices and not biases or gains") {
  struct Net : Module {
    std::shared_ptr<Embedding> emb;
    std::shared_ptr<Linear> fc;
    std::shared_ptr<LayerNorm> norm;
    std::shared_ptr<LayerScale> scale;
    std::shared_ptr<Affine> aff;
    explicit Net(Generator& gen) {
      emb = register_module("emb", std::make_shared<Embedding>(10, 4, gen));
      fc = register_module("fc", std::make_shared<Linear>(4, 4, true, gen));
      norm = register_module("norm", std::make_shared<LayerNorm>(4));
      scale = register_module("scale", std::make_shared<LayerScale>(4, 0.1));
      aff = register_module("aff", std::make_shared<Affine>(4));
    }
    std::string type_name() const override { return "Net"; }
  };
  Generator gen(1);
  Net net(gen);
  auto groups = param_groups(net, 0.05);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].weight_decay == 0.05);
  CHECK(groups[1].weight_decay == 0.0);
  CHECK(groups[0].names == std::vector<std::string>{"emb.weight", "fc.weight"});
  CHECK(groups[1].names == std::vector<std::string>{"fc.bias", "norm.weight", "norm.bias",
                                                    "scale.gamma", "aff.alpha", "aff.beta"});
  AdamW opt(groups, AdamOptions{});
  CHECK(opt.param_names().size() == 8);
}

TEST_CASE("optim: state round trip continues identically and refuses mismatches") {
  auto make = [](uint64_t seed) {
    Generator gen(seed);
    return std::vector<Tensor>{Tensor::uniform({3, 2}, -1, 1, gen),
                               Tensor::uniform({2}, -1, 1, gen)};
  };
  auto grads = [](int step) {
    Generator gen(100 + step);
    return std::vector<Tensor>{Tensor::uniform({3, 2}, -1, 1, gen),
                               Tensor::uniform({2}, -1, 1, gen)};
  };
  auto named = [](const std::vector<Tensor>& ps) {
    return named_group({{"w", ps[0]}, {"b", ps[1]}}, 0.01);
  };
  std::vector<Tensor> a = make(1), b = make(1);
  AdamW opt_a({named(a)}, AdamOptions{});
  for (int s = 0; s < 3; ++s) {
    auto g = grads(s);
    a[0].set_grad(g[0]), a[1].set_grad(g[1]);
    opt_a.step();
  }
  // b: same weights, fresh optimizer loaded from a's state.
  b[0].copy_(a[0]), b[1].copy_(a[1]);
  AdamW opt_b({named(b)}, AdamOptions{});
  std::map<std::string, Tensor> tensors;
  for (const auto& [n, t] : opt_a.state_tensors()) tensors[n] = t;
  opt_a.set_lr(0.002);
  opt_b.load_state(Json::parse(opt_a.state_json().dump()), tensors);
  CHECK(opt_b.lr() == 0.002);
  CHECK(opt_b.steps_taken() == 3);
  for (int s = 3; s < 5; ++s) {
    auto g = grads(s);
    a[0].set_grad(g[0]), a[1].set_grad(g[1]);
    b[0].set_grad(g[0]), b[1].set_grad(g[1]);
    opt_a.step();
    opt_b.step();
  }
  CHECK(a[0].to_float_vector() == b[0].to_float_vector());
  CHECK(a[1].to_float_vector() == b[1].to_float_vector());

  Json state = opt_a.state_json();
  std::vector<Tensor> c = make(2);
  AdamW opt_c({named(c)}, AdamOptions{});
  SUBCASE("wrong optimizer type") {
    Sgd sgd({named(c)}, SgdOptions{0.1, 0.9});
    CHECK_THROWS_AS(sgd.load_state(state, tensors), Error);
  }
  SUBCASE("shape mismatch names the tensor and both shapes") {
    auto bad = tensors;
    bad["w.exp_avg"] = Tensor::zeros({2, 3});
    try {
      opt_c.load_state(state, bad);
      FAIL("no error");
    } catch (const Error& e) {
      std::string msg = e.what();
      CHECK(msg.find("w.exp_avg") != std::string::npos);
      CHECK(msg.find("[2,3]") != std::string::npos);
      CHECK(msg.find("[3,2]") != std::string::npos);
    }
  }
  SUBCASE("missing and unexpected tensors") {
    auto bad = tensors;
    bad.erase("b.exp_avg_sq");
    bad["nope.exp_avg"] = Tensor::zeros({1});
    try {
      opt_c.load_state(state, bad);
      FAIL("no error");
    } catch (const Error& e) {
      std::string msg = e.what();
      CHECK(msg.find("b.exp_avg_sq") != std::string::npos);
      CHECK(msg.find("nope.exp_avg") != std::string::npos);
    }
  }
  // A failed load leaves the optimizer as it was: still no state.
  CHECK(opt_c.state_tensors().empty());
  CHECK(opt_c.steps_taken() == 0);
}

// ---- grad_utils ----

TEST_CASE("optim: grad_norm and clip_grad_norm follow PyTorch") {
  Tensor a = param_of({3.0, 0.0});
  Tensor b = param_of({0.0, 0.0, 4.0});
  Tensor none = param_of({9.0});
  set_grad(a, {3.0, 0.0});
  set_grad(b, {0.0, 0.0, 4.0});
  std::vector<Tensor> params{a, b, none};
  CHECK(grad_norm(params) == doctest::Approx(5.0).epsilon(1e-12));

  SUBCASE("below the threshold nothing changes") {
    CHECK(clip_grad_norm(params, 10.0) == doctest::Approx(5.0));
    check_near(a.grad(), {3.0, 0.0});
  }
  SUBCASE("above it every gradient is scaled by max_norm / (norm + 1e-6)") {
    CHECK(clip_grad_norm(params, 1.0) == doctest::Approx(5.0));
    const double coef = 1.0 / (5.0 + 1e-6);
    check_near(a.grad(), {3.0 * coef, 0.0});
    check_near(b.grad(), {0.0, 0.0, 4.0 * coef});
    CHECK(grad_norm(params) == doctest::Approx(1.0).epsilon(1e-6));
    CHECK_FALSE(none.grad().defined());
  }
  SUBCASE("a non-finite norm is returned and the gradients kept") {
    set_grad(b, {0.0, std::numeric_limits<double>::infinity(), 1.0});
    CHECK_FALSE(std::isfinite(clip_grad_norm(params, 1.0)));
    check_near(a.grad(), {3.0, 0.0});
  }
}

TEST_CASE("optim: clipping a gradient shared by two leaves scales each once") {
  // add's backward hands the same gradient to both inputs; an in-place scale would hit the
  // shared storage twice.
  Tensor a = param_of({1.0, 1.0});
  Tensor b = param_of({1.0, 1.0});
  add(a, b).backward(Tensor::from_data(std::vector<float>{3.0f, 4.0f}, {2}));
  // Norm = sqrt(2 · 25).
  const double norm = std::sqrt(50.0);
  CHECK(clip_grad_norm({a, b}, 1.0) == doctest::Approx(norm));
  const double coef = 1.0 / (norm + 1e-6);
  check_near(a.grad(), {3.0 * coef, 4.0 * coef});
  check_near(b.grad(), {3.0 * coef, 4.0 * coef});
}

TEST_CASE("optim: k micro-batches of size b give the gradient of one batch of k times b") {
  Generator gen(7);
  Linear fc1(5, 8, true, gen), fc2(8, 3, true, gen);
  const int64_t k = 4, b = 3;
  Tensor x = Tensor::uniform({k * b, 5}, -1, 1, gen);
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < k * b; ++i) labels.push_back(static_cast<int32_t>(i % 3));
  Tensor y = Tensor::from_data(labels, {k * b});
  auto loss_of = [&](const Tensor& xs, const Tensor& ys) {
    return cross_entropy(fc2.forward(gelu(fc1.forward(xs))), ys);
  };
  std::vector<Tensor> params = fc1.parameters();
  for (const Tensor& p : fc2.parameters()) params.push_back(p);

  loss_of(x, y).backward();
  std::vector<Vec> full;
  for (const Tensor& p : params) full.push_back(p.grad().to_double_vector());

  for (const Tensor& p : params) p.zero_grad();
  for (int64_t i = 0; i < k; ++i)
    (loss_of(narrow(x, 0, i * b, b), narrow(y, 0, i * b, b)) * (1.0 / k)).backward();
  for (size_t j = 0; j < params.size(); ++j) check_near(params[j].grad(), full[j], 1e-6);
}

TEST_CASE("optim: a model converted after the optimizer was built is an error") {
  Generator gen(3);
  Linear fc(3, 2, true, gen);
  AdamW opt(param_groups(fc, 0.01), AdamOptions{});
  sum(fc.forward(Tensor::ones({1, 3}))).backward();
  opt.step();
  fc.to(DType::F64);
  sum(fc.forward(Tensor::ones({1, 3}, DType::F64))).backward();
  try {
    opt.step();
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("build the optimizer after") != std::string::npos);
  }
}

// Needs a CUDA device (skipped without one; tests/gpu/check.sh runs it): the same steps on both
// devices agree.
TEST_CASE("cuda: optim steps and clipping match the CPU" *
          doctest::skip(!device_available(DeviceType::CUDA))) {
  const Device gpu = Device::cuda();
  auto both = [&](const std::function<std::unique_ptr<Optimizer>(const Tensor&)>& make) {
    Tensor cpu_p = param_of(kP0);
    Tensor gpu_p = cpu_p.detach().to(gpu);
    gpu_p.set_requires_grad(true);
    auto cpu_opt = make(cpu_p);
    auto gpu_opt = make(gpu_p);
    for (const Vec& g : {kG1, kG2, kG1}) {
      set_grad(cpu_p, g);
      gpu_p.set_grad(cpu_p.grad().to(gpu));
      cpu_opt->step();
      gpu_opt->step();
      check_near(gpu_p, cpu_p.to_double_vector());
    }
  };
  both([](const Tensor& p) {
    return std::make_unique<AdamW>(std::vector<ParamGroup>{{{p}, 0.1}}, AdamOptions{0.01});
  });
  both([](const Tensor& p) {
    return std::make_unique<Adam>(std::vector<ParamGroup>{{{p}, 0.1}}, AdamOptions{0.01});
  });
  both([](const Tensor& p) {
    return std::make_unique<Sgd>(std::vector<ParamGroup>{{{p}, 0.01}},
                                 SgdOptions{0.1, 0.9, 0.0, true});
  });

  Tensor a = param_of({3.0, 0.0}).detach().to(gpu);
  Tensor b = param_of({0.0, 0.0, 4.0}).detach().to(gpu);
  a.set_grad(Tensor::from_data(std::vector<float>{3, 0}, {2}, gpu));
  b.set_grad(Tensor::from_data(std::vector<float>{0, 0, 4}, {3}, gpu));
  CHECK(clip_grad_norm({a, b}, 1.0) == doctest::Approx(5.0));
  CHECK(a.grad().device() == gpu);
  check_near(a.grad(), {3.0 / (5.0 + 1e-6), 0.0});
}
