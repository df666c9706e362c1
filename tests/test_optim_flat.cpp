// The optimizers' flat buffer (train/optimizer.h): parameters become views into one buffer,
// gradients land in their slots, one kernel call covers the model, and the numbers are those of
// the per-tensor path (flat_buffer = false), through clipping, skipped parameters and a resume.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/gradient_routing.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "train/optim/grad_utils.h"
#include "train/optim/optimizer.h"
#include "tests/app_runner.h"
#include "tests/temp_dir.h"

using namespace mixlab;

namespace {

// Matrices (decayed) and biases and a norm (not decayed), plus a branch used only on some steps,
// so that a parameter misses steps and falls behind in its own step count.
class TinyNet : public Module {
 public:
  explicit TinyNet(uint64_t seed) : gen_(seed) {
    fc1 = register_module("fc1", std::make_shared<Linear>(6, 8, true, gen_));
    norm = register_module("norm", std::make_shared<LayerNorm>(8));
    fc2 = register_module("fc2", std::make_shared<Linear>(8, 3, true, gen_));
    extra = register_module("extra", std::make_shared<Linear>(6, 3, true, gen_));
  }
  std::string type_name() const override { return "TinyNet"; }
  Tensor forward(const Tensor& x, bool use_extra) const {
    Tensor y = fc2->forward(gelu(norm->forward(fc1->forward(x))));
    return use_extra ? add(y, extra->forward(x)) : y;
  }
  std::shared_ptr<Linear> fc1, fc2, extra;
  std::shared_ptr<LayerNorm> norm;

 private:
  Generator gen_;
};

// The batch of step s: a pure function of s.
Tensor loss_at(const TinyNet& net, int s) {
  Generator gen(100 + s);
  Tensor x = Tensor::uniform({5, 6}, -1, 1, gen);
  Tensor y = Tensor::from_data(std::vector<int32_t>{0, 1, 2, 1, s % 3}, {5});
  return cross_entropy(net.forward(x, s % 3 != 1), y);
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& kind, const TinyNet& net, bool flat) {
  if (kind == "sgd") {
    SgdOptions o;
    o.lr = 0.05, o.momentum = 0.9, o.flat_buffer = flat;
    return std::make_unique<Sgd>(param_groups(net, 0.01), o);
  }
  AdamOptions o;
  o.lr = 1e-2, o.flat_buffer = flat;
  if (kind == "adam") return std::make_unique<Adam>(param_groups(net, 0.01), o);
  return std::make_unique<AdamW>(param_groups(net, 0.1), o);
}

void train_steps(const TinyNet& net, Optimizer& opt, int from, int to, double clip) {
  for (int s = from; s < to; ++s) {
    loss_at(net, s).backward();
    if (clip > 0) clip_grad_norm(net.parameters(), clip);
    opt.step();
    opt.zero_grad();
  }
}

std::vector<std::vector<float>> values(const Module& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.to_float_vector());
  return out;
}

double max_relative_difference(const std::vector<std::vector<float>>& a,
                               const std::vector<std::vector<float>>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j)
      worst = std::max(worst, std::abs(static_cast<double>(a[i][j]) - b[i][j]) /
                                  (1e-3 + std::abs(static_cast<double>(b[i][j]))));
  }
  return worst;
}

// Whether a parameter's gradient is its grad slot as gradient routing puts it there; under plain
// autograd (MIXLAB_PLAIN_AUTOGRAD=1) it is a fresh tensor instead, with the same values.
bool in_slot(const Tensor& p) { return p.grad().same_as(p.grad_slot()) != plain_autograd(); }

// Each slotted parameter's gradient is its slot and holds the values of the same parameter's
// gradient without an optimizer (fresh tensors all the way).
void check_in_slots_as_plain(const std::vector<Tensor>& slotted, const std::vector<Tensor>& plain) {
  REQUIRE(slotted.size() == plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    CHECK(in_slot(slotted[i]));
    CHECK(slotted[i].grad().to_float_vector() == plain[i].grad().to_float_vector());
  }
}

}  // namespace

TEST_CASE("optim flat: parameters become views into one buffer, with their values") {
  TinyNet net(1);
  const auto before = values(net);
  AdamW opt(param_groups(net, 0.1), AdamOptions{});
  REQUIRE(opt.is_flat());
  CHECK(values(net) == before);
  const Tensor& flat = opt.flat_params();
  CHECK(flat.numel() == net.parameter_count());
  // Group order: matrices first, then biases and norms; each a contiguous view, back to back.
  int64_t next = 0;
  for (const ParamGroup& group : opt.groups())
    for (const Tensor& p : group.params) {
      CHECK(p.impl().storage == flat.impl().storage);
      CHECK(p.offset() == next);
      CHECK(p.is_contiguous());
      CHECK(p.grad_slot().impl().storage == opt.flat_grads().impl().storage);
      CHECK(p.grad_slot().offset() == next);
      next += p.numel();
    }
  CHECK(next == flat.numel());
  // The module's own member handles are the same tensors: writing through one shows in the buffer.
  net.fc1->weight.fill_(0.5);
  CHECK(flat.to_float_vector()[0] == 0.5f);
}

TEST_CASE("optim flat: backward copies the first gradient into the slot and adds later ones") {
  TinyNet plain(2), slotted(2);
  AdamW opt(param_groups(slotted, 0.1), AdamOptions{});
  loss_at(plain, 0).backward();
  loss_at(slotted, 0).backward();
  auto ps = plain.parameters(), ss = slotted.parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    CHECK(in_slot(ss[i]));
    CHECK(ss[i].grad().to_float_vector() == ps[i].grad().to_float_vector());
  }
  // A second backward accumulates in place: the same float additions as the fresh-tensor path.
  loss_at(plain, 3).backward();
  loss_at(slotted, 3).backward();
  for (size_t i = 0; i < ps.size(); ++i) {
    CHECK(in_slot(ss[i]));
    CHECK(ss[i].grad().to_float_vector() == ps[i].grad().to_float_vector());
  }
  // zero_grad() is set-to-none; the next gradient overwrites the stale slot (nothing left over).
  opt.zero_grad();
  plain.zero_grad();
  for (const Tensor& p : ss) CHECK_FALSE(p.grad().defined());
  loss_at(plain, 5).backward();
  loss_at(slotted, 5).backward();
  for (size_t i = 0; i < ps.size(); ++i)
    CHECK(ss[i].grad().to_float_vector() == ps[i].grad().to_float_vector());
}

TEST_CASE("optim flat: a gradient shared by two leaves is copied into each slot") {
  Tensor a = Tensor::from_data(std::vector<float>{1, 1}, {2}).set_requires_grad(true);
  Tensor b = Tensor::from_data(std::vector<float>{1, 1}, {2}).set_requires_grad(true);
  AdamW opt({ParamGroup{{a, b}, 0.0}}, AdamOptions{});
  // add's backward hands one gradient tensor to both inputs.
  add(a, b).backward(Tensor::from_data(std::vector<float>{3, 4}, {2}));
  CHECK(in_slot(a));
  CHECK(in_slot(b));
  const double norm = std::sqrt(50.0);
  CHECK(clip_grad_norm({a, b}, 1.0) == doctest::Approx(norm));  // the flat path: one range
  const float coef = static_cast<float>(1.0 / (norm + 1e-6));
  CHECK(a.grad().to_float_vector()[1] == doctest::Approx(4 * coef));
  CHECK(b.grad().to_float_vector()[1] == doctest::Approx(4 * coef));  // scaled once, not twice
}

// Linear layers, the layer norm, scale_shift and the embedding write a parameter's first
// gradient straight into its slot (leaf_gradient_buffer): the same bits as the fresh-tensor path,
// also where a leaf is used twice by one op (w as linear's input and its weight: the second
// request gets a fresh tensor, added in place) and by two ops, and across two backward passes.
TEST_CASE("optim flat: gradients written straight into the slots are the fresh-tensor path's") {
  struct Params {
    Tensor w, b, table, gamma, beta, scale, shift;
    std::vector<Tensor> all() const { return {w, b, table, gamma, beta, scale, shift}; }
  };
  auto make = [] {
    Generator gen(11);
    auto leaf = [&gen](Shape shape) {
      return Tensor::uniform(shape, -1, 1, gen).set_requires_grad(true);
    };
    return Params{leaf({4, 4}), leaf({4}), leaf({6, 4}), leaf({4}),
                  leaf({4}),    leaf({4}), leaf({4})};
  };
  auto loss = [](const Params& p, int s) {
    Tensor idx = Tensor::from_data(std::vector<int32_t>{1, 4, s % 6, 1}, {4});
    Tensor x = embedding(p.table, idx);                             // [4, 4]
    Tensor h = layer_norm(linear(x, p.w, p.b), p.gamma, p.beta);    // w, b: 1st use
    Tensor z = scale_shift(linear(h, p.w, p.b), p.scale, p.shift);  // w, b: 2nd use
    Tensor self = linear(p.w, p.w, p.b);                            // w twice in one op
    return add(sum(mul(z, z)), sum(mul(self, 0.5)));
  };
  Params plain = make(), slotted = make();
  AdamW opt({ParamGroup{slotted.all(), 0.0}}, AdamOptions{});
  REQUIRE(opt.is_flat());
  for (int s : {0, 3}) {  // the second pass adds to the first's gradients (no zero_grad)
    loss(plain, s).backward();
    loss(slotted, s).backward();
    check_in_slots_as_plain(slotted.all(), plain.all());
  }
}

// The packed projection of attention: concat of three parameters the optimizer laid out back to
// back is a view of them (nothing copied forward), and its gradient is written into the span of
// their slots (nothing copied backward). Where a piece or the concat has another use in the
// pass, the copying path takes over; the gradients are the plain path's bits every time.
TEST_CASE(
    "optim flat: an adjacent concat of parameters is a view, its gradient lands in the slots") {
  auto make = [] {
    Generator gen(12);
    std::vector<Tensor> p;
    for (Shape shape : {Shape{3, 4}, Shape{3, 4}, Shape{3, 4}, Shape{3}, Shape{3}, Shape{3}})
      p.push_back(Tensor::uniform(shape, -1, 1, gen).set_requires_grad(true));
    return p;
  };
  Generator data(13);
  Tensor x = Tensor::uniform({5, 4}, -1, 1, data);
  // variant 0: only the packed layer; 1: a piece used again on its own; 2: the packed weight
  // used by two layers.
  auto loss = [&x](const std::vector<Tensor>& p, int variant) {
    Tensor w = concat({p[0], p[1], p[2]}, 0), b = concat({p[3], p[4], p[5]}, 0);
    Tensor y = sum(mul(linear(x, w, b), linear(x, w, b).detach()));
    if (variant == 1) y = add(y, sum(linear(x, p[1], p[4])));
    if (variant == 2) y = add(y, sum(linear(x, w, Tensor())));
    return y;
  };
  for (int variant : {0, 1, 2}) {
    CAPTURE(variant);
    std::vector<Tensor> plain = make(), slotted = make();
    AdamW opt({ParamGroup{{slotted[0], slotted[1], slotted[2]}, 0.1},
               ParamGroup{{slotted[3], slotted[4], slotted[5]}, 0.0}},
              AdamOptions{});
    REQUIRE(opt.is_flat());
    Tensor packed = concat({slotted[0], slotted[1], slotted[2]}, 0);
    CHECK(packed.impl().storage == slotted[0].impl().storage);  // a view: no copy
    CHECK(packed.offset() == slotted[0].offset());
    CHECK(concat({plain[0], plain[1], plain[2]}, 0).impl().storage !=
          plain[0].impl().storage);  // separate tensors: copied, as before
    // Adjacent pieces that are not parameters (a bucket of gradients about to be reduced in
    // place) are copied too: a caller may write the result.
    Tensor buffer = Tensor::zeros({6});
    CHECK(concat({narrow(buffer, 0, 0, 3), narrow(buffer, 0, 3, 3)}, 0).impl().storage !=
          buffer.impl().storage);
    loss(plain, variant).backward();
    loss(slotted, variant).backward();
    check_in_slots_as_plain(slotted, plain);
  }
}

// Windows of a parameter (gMLP's two halves of U) add their gradients into the parameter's slot
// (add_to_leaf_window): the first zeroes the rest. The same values as the full-shape path with
// both halves, with one half only, a window along the second axis, and the whole parameter also
// used directly (before or after the windows in the backward order).
TEST_CASE("optim flat: gradients of a parameter's windows go straight into its slot") {
  auto make = [] {
    Generator gen(14);
    return std::vector<Tensor>{Tensor::uniform({4, 3}, -1, 1, gen).set_requires_grad(true),
                               Tensor::uniform({4}, -1, 1, gen).set_requires_grad(true)};
  };
  Generator data(15);
  Tensor x = Tensor::uniform({5, 3}, -1, 1, data);
  auto loss = [&x](const std::vector<Tensor>& p, int variant) {
    const Tensor &u = p[0], &b = p[1];
    Tensor z1 = linear(x, narrow(u, 0, 0, 2), narrow(b, 0, 0, 2));
    Tensor y = sum(mul(z1, z1));
    if (variant != 1) y = add(y, sum(gelu(linear(x, narrow(u, 0, 2, 2), narrow(b, 0, 2, 2)))));
    if (variant == 2) y = add(y, sum(mul(narrow(u, 1, 1, 2), 3.0)));  // a strided window
    if (variant == 3) y = add(sum(linear(x, u, b)), y);               // the whole, too
    return y;
  };
  for (int variant : {0, 1, 2, 3}) {
    CAPTURE(variant);
    std::vector<Tensor> plain = make(), slotted = make();
    AdamW opt({ParamGroup{{slotted[0], slotted[1]}, 0.0}}, AdamOptions{});
    REQUIRE(opt.is_flat());
    for (int pass = 0; pass < 3; ++pass) {  // the second adds to the first; the third starts
      if (pass == 2) {                      // again over the stale slot (set-to-none)
        opt.zero_grad();
        for (const Tensor& p : plain) p.zero_grad();
      }
      loss(plain, variant).backward();
      loss(slotted, variant).backward();
      check_in_slots_as_plain(slotted, plain);
    }
  }
}

// The trainer clips with clip_grad_norm_tensor (its factor computed where the gradients are, so
// a GPU step never reads the norm back): the gradients must end exactly as the host-side rule
// leaves them (factor max / (norm + 1e-6) read to the host and applied when below 1), on the
// flat path and the per-tensor one, clipped or not, and untouched for a non-finite norm.
TEST_CASE("optim flat: clipping on the device gives the host rule's gradients bit for bit") {
  for (bool flat : {true, false}) {
    for (double max_norm : {0.05, 1e3}) {
      for (bool poisoned : {false, true}) {
        INFO("flat ", flat, ", max_norm ", max_norm, ", non-finite ", poisoned);
        TinyNet host_net(7), device_net(7);
        auto host_opt = make_optimizer("adamw", host_net, flat);
        auto device_opt = make_optimizer("adamw", device_net, flat);
        loss_at(host_net, 2).backward();
        loss_at(device_net, 2).backward();
        std::vector<Tensor> hp = host_net.parameters(), dp = device_net.parameters();
        if (poisoned) {
          NoGradGuard no_grad;
          for (auto* ps : {&hp, &dp}) {
            Tensor g = (*ps)[1].grad();
            std::vector<float> v = g.to_float_vector();
            v[0] = std::numeric_limits<float>::infinity();
            (*ps)[1].set_grad(Tensor::from_data(v, g.shape()));
          }
        }
        // The host rule, written out.
        const double norm = grad_norm(hp);
        const double coef = max_norm / (norm + 1e-6);
        if (std::isfinite(norm) && coef < 1.0) scale_grads(hp, coef);
        Tensor got = clip_grad_norm_tensor(dp, max_norm);
        REQUIRE(got.numel() == 1);
        if (poisoned) {
          CHECK_FALSE(std::isfinite(got.item()));
        } else {
          CHECK(got.item() == norm);
        }
        CHECK(device_opt->is_flat() == flat);
        for (size_t i = 0; i < hp.size(); ++i) {
          INFO("parameter ", i);
          REQUIRE(dp[i].grad().defined() == hp[i].grad().defined());
          if (!hp[i].grad().defined()) continue;
          std::vector<float> want = hp[i].grad().to_float_vector();
          std::vector<float> have = dp[i].grad().to_float_vector();
          REQUIRE(want.size() == have.size());
          int differ = 0;
          for (size_t j = 0; j < want.size(); ++j)
            differ += std::memcmp(&want[j], &have[j], sizeof(float)) != 0;
          CHECK(differ == 0);
        }
      }
    }
  }
}

TEST_CASE("optim flat: the flat and per-tensor paths train to the same numbers") {
  for (const std::string kind : {"adamw", "adam", "sgd"}) {
    INFO(kind);
    TinyNet flat_net(3), tensor_net(3);
    auto flat_opt = make_optimizer(kind, flat_net, true);
    auto tensor_opt = make_optimizer(kind, tensor_net, false);
    CHECK(flat_opt->is_flat());
    CHECK_FALSE(tensor_opt->is_flat());
    // Without clipping every element goes through the same formula: bit for bit.
    train_steps(flat_net, *flat_opt, 0, 7, 0.0);
    train_steps(tensor_net, *tensor_opt, 0, 7, 0.0);
    CHECK(values(flat_net) == values(tensor_net));
    CHECK(flat_opt->state_json().dump() == tensor_opt->state_json().dump());  // steps too
    // With clipping (always active at 0.05) the norm is summed in another order: float rounding.
    train_steps(flat_net, *flat_opt, 7, 14, 0.05);
    train_steps(tensor_net, *tensor_opt, 7, 14, 0.05);
    CHECK(max_relative_difference(values(flat_net), values(tensor_net)) < 1e-5);
    CHECK(flat_opt->is_flat());
  }
}

TEST_CASE("optim flat: a resumed optimizer continues exactly like an uninterrupted one") {
  TinyNet straight(4), first(4);
  AdamW straight_opt(param_groups(straight, 0.1), AdamOptions{1e-2});
  AdamW first_opt(param_groups(first, 0.1), AdamOptions{1e-2});
  train_steps(straight, straight_opt, 0, 10, 0.5);
  train_steps(first, first_opt, 0, 5, 0.5);

  // What a checkpoint holds: weights, the optimizer's JSON and its tensors by name (copies).
  std::map<std::string, Tensor> weights, state;
  for (const auto& [name, t] : first.named_parameters()) weights[name] = t.clone();
  for (const auto& [name, t] : first_opt.state_tensors()) state[name] = t.clone();
  const Json json = first_opt.state_json();

  TinyNet resumed(99);  // different initial values, all overwritten
  AdamW resumed_opt(param_groups(resumed, 0.1), AdamOptions{1e-2});
  // Weights replaced by storage swap (as Module::to() does): the next step lays them out again.
  for (const auto& [name, t] : resumed.named_parameters()) assign_in_place(t, weights.at(name));
  CHECK_FALSE(resumed_opt.is_flat());
  resumed_opt.load_state(json, state);
  train_steps(resumed, resumed_opt, 5, 10, 0.5);
  CHECK(resumed_opt.is_flat());
  CHECK(values(resumed) == values(straight));
  auto a = resumed_opt.state_tensors(), b = straight_opt.state_tensors();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.to_float_vector() == b[i].second.to_float_vector());
  }
}

TEST_CASE("optim flat: a model converted before the first step is laid out again") {
  TinyNet net(5);
  AdamW opt(param_groups(net, 0.1), AdamOptions{});
  net.to(DType::F64);
  CHECK_FALSE(opt.is_flat());
  Generator gen(1);
  Tensor x = Tensor::uniform({2, 6}, -1, 1, gen, DType::F64);
  sum(net.forward(x, true)).backward();
  opt.step();
  CHECK(opt.is_flat());
  CHECK(opt.flat_params().dtype() == DType::F64);
  CHECK(net.fc1->weight.impl().storage == opt.flat_params().impl().storage);
}

TEST_CASE("optim flat: mixed dtypes keep the per-tensor path") {
  Tensor a = Tensor::from_data(std::vector<float>{1, 2}, {2}).set_requires_grad(true);
  Tensor b = Tensor::from_data(std::vector<double>{3, 4}, {2}).set_requires_grad(true);
  Sgd opt({ParamGroup{{a, b}}}, SgdOptions{0.5});
  CHECK_FALSE(opt.is_flat());
  CHECK_FALSE(a.grad_slot().defined());
  a.set_grad(Tensor::from_data(std::vector<float>{1, 1}, {2}));
  b.set_grad(Tensor::from_data(std::vector<double>{2, 2}, {2}));
  opt.step();
  CHECK(a.to_double_vector() == std::vector<double>{0.5, 1.5});
  CHECK(b.to_double_vector() == std::vector<double>{2.0, 3.0});
}

TEST_CASE("optim flat: the optimizer's end releases the gradient slots") {
  TinyNet net(6);
  {
    AdamW opt(param_groups(net, 0.1), AdamOptions{});
    CHECK(net.fc1->weight.grad_slot().defined());
  }
  for (const Tensor& p : net.parameters()) CHECK_FALSE(p.grad_slot().defined());
  loss_at(net, 0).backward();  // plain fresh gradients again
  for (const Tensor& p : net.parameters()) CHECK(p.grad().defined());
}

TEST_CASE("optim flat: a training step makes one adam_update_flat call (MIXLAB_DEBUG table)") {
  // A real run of the command line, traced: the table's call counts are the kernel calls made.
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  {
    std::ofstream pairs(dir + "/pairs.tsv");
    const char* words[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 200; ++i) {
      const int len = 1 + i % 3;
      for (int t = 0; t < len; ++t) pairs << (t ? " " : "") << words[(i + t) % 4];
      pairs << "\t";
      for (int t = len - 1; t >= 0; --t) pairs << (t != len - 1 ? " " : "") << words[(i + t) % 4];
      pairs << "\n";
    }
  }
  const int steps = 3;
  testing::Exit e =
      testing::run_app({"translate", "train", "--data", dir + "/pairs.tsv", "--dim", "16",
                        "--heads", "2", "--layers", "1", "--batch", "8", "--steps",
                        std::to_string(steps), "--threads", "1", "--quiet", "--out", dir + "/run"},
                       dir + "/log.txt", {{"MIXLAB_DEBUG", "1"}, {"MIXLAB_PLAIN_AUTOGRAD", "0"}});
  INFO(e.output);
  REQUIRE(e.code == 0);
  std::map<std::string, long long> calls = testing::kernel_call_counts(e.output);
  CHECK(calls["adam_update_flat"] == steps);
  CHECK(calls.count("adam_update") == 0);  // no per-tensor call at all
}
