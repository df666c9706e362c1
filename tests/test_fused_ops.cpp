// The fused ops (autograd/ops/linear.cpp, residual.cpp, dropout.cpp): float64 finite-difference
// gradients, and agreement in float32 with the unfused ops they replace (forward and every
// gradient), including the dropout mask against the dropout_mask kernel's.
#include <fstream>
#include <functional>
#include <map>

#include "backends/backend.h"
#include "nn/mixers/common.h"
#include "tests/app_runner.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;
using Inputs = std::vector<Tensor>;

namespace {

Tensor fused_leaf32(const Shape& shape, uint64_t seed) {
  return rand32(shape, seed).set_requires_grad();
}

// The mask dropout(·, p, true, seed) used before the fusions: the dropout_mask kernel's.
Tensor mask_of(const Shape& shape, double p, uint64_t seed) {
  Tensor m = Tensor::empty(shape, DType::F32, Device::cpu());
  backend_for(m.device()).dropout_mask(m.view(), p, seed);
  return m;
}

// Runs `fn` on fresh copies of `inputs`, then backward from sum(out ⊙ weights) (weights seeded
// per output), and returns the outputs' and the inputs' gradients' values, in order.
std::vector<std::vector<float>> run_with_grads(
    const std::function<std::vector<Tensor>(const Inputs&)>& fn, const Inputs& inputs) {
  Inputs in;
  for (const Tensor& t : inputs) in.push_back(t.detach().clone().set_requires_grad());
  std::vector<Tensor> outs = fn(in);
  Tensor loss;
  std::vector<std::vector<float>> values;
  for (size_t k = 0; k < outs.size(); ++k) {
    Tensor w = rand32(outs[k].shape(), 900 + k);
    Tensor term = sum(mul(outs[k], w));
    loss = loss.defined() ? add(loss, term) : term;
    values.push_back(outs[k].to_float_vector());
  }
  loss.backward();
  for (const Tensor& t : in)  // inputs the op does not read get no gradient
    values.push_back(t.grad().defined() ? t.grad().to_float_vector() : std::vector<float>{});
  return values;
}

// Fused against unfused within float32 tolerance; says whether every value is bit-identical.
void check_fused_agrees(const std::function<std::vector<Tensor>(const Inputs&)>& fused,
                        const std::function<std::vector<Tensor>(const Inputs&)>& unfused,
                        const Inputs& inputs) {
  auto a = run_with_grads(fused, inputs);
  auto b = run_with_grads(unfused, inputs);
  REQUIRE(a.size() == b.size());
  bool identical = true;
  for (size_t k = 0; k < a.size(); ++k) {
    REQUIRE(a[k].size() == b[k].size());
    double scale = 0;
    for (float v : b[k]) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (size_t i = 0; i < a[k].size(); ++i) {
      INFO("value set " << k << " element " << i << ": " << a[k][i] << " vs " << b[k][i]);
      CHECK(std::abs(a[k][i] - b[k][i]) <= 1e-5 * (scale + 1e-30) + 1e-30);
      identical = identical && a[k][i] == b[k][i];
    }
  }
  MESSAGE("fused and unfused bit-identical: " << std::string(identical ? "yes" : "no"));
}

}  // namespace

TEST_CASE("fused: gradcheck bias_add, bias_gelu, linear, linear_gelu") {
  Inputs rows{rand64({2, 3, 5}, 1), rand64({5}, 2)};
  CHECK_GRADS([](const Inputs& x) { return bias_add(x[0], x[1]); }, rows);
  CHECK_GRADS([](const Inputs& x) { return bias_gelu(x[0], x[1]); }, rows);
  // A non-contiguous input (a transposed view) goes through a dense copy.
  CHECK_GRADS([](const Inputs& x) { return bias_gelu(transpose(x[0], 0, 2), x[1]); },
              (Inputs{rand64({4, 3, 2}, 3), rand64({4}, 4)}));
  Inputs lin{rand64({2, 3, 4}, 5), rand64({6, 4}, 6), rand64({6}, 7)};
  CHECK_GRADS([](const Inputs& x) { return linear(x[0], x[1], x[2]); }, lin);
  CHECK_GRADS([](const Inputs& x) { return linear_gelu(x[0], x[1], x[2]); }, lin);
  CHECK_GRADS([](const Inputs& x) { return linear_gelu(x[0], x[1], Tensor()); },
              (Inputs{rand64({3, 4}, 8), rand64({2, 4}, 9)}));
}

TEST_CASE("fused: gradcheck add_dropout and add_dropout_layer_norm") {
  for (double p : {0.0, 0.3}) {
    INFO("p = " << p);
    Inputs in{rand64({2, 3, 6}, 10), rand64({2, 3, 6}, 11), rand64({6}, 12), rand64({6}, 13)};
    CHECK_GRADS([p](const Inputs& x) { return add_dropout(x[0], x[1], p, 77); }, in);
    // Both outputs reach the loss: the sum feeds later ops as well as the norm.
    CHECK_GRADS(
        [p](const Inputs& x) {
          ResidualNorm r = add_dropout_layer_norm(x[0], x[1], p, 77, x[2], x[3]);
          return add(r.normed, mul(r.sum, 0.7));
        },
        in);
    CHECK_GRADS(
        [p](const Inputs& x) {
          return add_dropout_layer_norm(x[0], x[1], p, 78, Tensor(), Tensor()).normed;
        },
        in);
  }
  CHECK_GRADS([](const Inputs& x) { return dropout(x[0], 0.4, true, 5); },
              Inputs{rand64({3, 7}, 14)});
}

TEST_CASE("fused: bias and bias + GELU agree with matmul, add and gelu in float32") {
  Inputs in{fused_leaf32({4, 9, 16}, 20), fused_leaf32({24, 16}, 21), fused_leaf32({24}, 22)};
  check_fused_agrees([](const Inputs& x) { return std::vector<Tensor>{linear(x[0], x[1], x[2])}; },
                     [](const Inputs& x) {
                       return std::vector<Tensor>{add(matmul(x[0], transpose(x[1], 0, 1)), x[2])};
                     },
                     in);
  check_fused_agrees(
      [](const Inputs& x) { return std::vector<Tensor>{linear_gelu(x[0], x[1], x[2])}; },
      [](const Inputs& x) {
        Tensor y = add(matmul(x[0], transpose(x[1], 0, 1)), x[2]);
        return std::vector<Tensor>{gelu(y, GeluForm::Erf)};
      },
      in);
}

TEST_CASE("fused: gradcheck feed_forward, on a contiguous input and on a transposed view") {
  Inputs in{rand64({2, 3, 4}, 60), rand64({7, 4}, 61), rand64({7}, 62), rand64({5, 7}, 63),
            rand64({5}, 64)};
  CHECK_GRADS([](const Inputs& x) { return feed_forward(x[0], x[1], x[2], x[3], x[4]); }, in);
  CHECK_GRADS(
      [](const Inputs& x) { return feed_forward(transpose(x[0], 1, 2), x[1], x[2], x[3], x[4]); },
      (Inputs{rand64({2, 4, 3}, 65), rand64({7, 4}, 61), rand64({7}, 62), rand64({5, 7}, 63),
              rand64({5}, 64)}));
}

TEST_CASE("fused: feed_forward and linear agree with matmul, add and gelu in float32") {
  // 300 rows take the CPU's tall product with the epilogue in it (≥ 256 rows, AVX-512 builds);
  // 40 rows take OpenBLAS and a separate pass.
  for (int64_t items : {1, 3}) {
    INFO("rows = " << items * 100 - (items == 1 ? 60 : 0));
    Shape shape{items, items == 1 ? 40 : 100, 48};
    Inputs in{fused_leaf32(shape, 70), fused_leaf32({96, 48}, 71), fused_leaf32({96}, 72),
              fused_leaf32({40, 96}, 73), fused_leaf32({40}, 74)};
    auto unfused_linear = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return add(matmul(x, transpose(w, 0, 1)), b);
    };
    check_fused_agrees(
        [](const Inputs& x) {
          return std::vector<Tensor>{feed_forward(x[0], x[1], x[2], x[3], x[4])};
        },
        [&](const Inputs& x) {
          Tensor h = gelu(unfused_linear(x[0], x[1], x[2]), GeluForm::Erf);
          return std::vector<Tensor>{unfused_linear(h, x[3], x[4])};
        },
        in);
    check_fused_agrees(
        [](const Inputs& x) {
          return std::vector<Tensor>{linear(x[0], x[1], x[2]), linear_gelu(x[0], x[1], x[2])};
        },
        [&](const Inputs& x) {
          Tensor y = unfused_linear(x[0], x[1], x[2]);
          return std::vector<Tensor>{y, gelu(y, GeluForm::Erf)};
        },
        in);
  }
}

TEST_CASE("fused: feed_forward's forward slope gives linear_gelu's gradients, bit for bit") {
  // Both keep gelu'(pre) from their forward (BiasGeluSlope); feed_forward multiplies by it in
  // its second product's epilogue (Times), linear_gelu in a pass over the gradient linear's
  // backward hands it. Both sum b₁'s gradient with W₁'s (RowSums). The same formulas on the same
  // products: every value and gradient has the same bits. 300 rows: the tall kernel's epilogue;
  // 40: OpenBLAS and a pass of its own.
  for (int64_t rows : {40, 300}) {
    INFO("rows = " << rows);
    Inputs in{fused_leaf32({rows, 48}, 75), fused_leaf32({96, 48}, 76), fused_leaf32({96}, 77),
              fused_leaf32({40, 96}, 78), fused_leaf32({40}, 79)};
    for (const Tensor& t : {in[0], in[1]}) {  // values of a few units: GELU's curved part
      float* v = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) v[i] *= 3.0f;
    }
    auto fused = run_with_grads(
        [](const Inputs& x) {
          return std::vector<Tensor>{feed_forward(x[0], x[1], x[2], x[3], x[4])};
        },
        in);
    auto layered = run_with_grads(
        [](const Inputs& x) {
          return std::vector<Tensor>{linear(linear_gelu(x[0], x[1], x[2]), x[3], x[4])};
        },
        in);
    REQUIRE(fused.size() == 6);
    for (size_t k = 0; k < fused.size(); ++k) {
      INFO("value " << k << " (0: output, then the gradients of x, W1, b1, W2, b2)");
      CHECK(fused[k] == layered[k]);
    }
  }
}

TEST_CASE("fused: linear_gelu multiplies a gradient it does not own into a buffer of its own") {
  // The backward writes g ⊙ gelu'(pre) over g only when nothing else holds g. An upstream
  // gradient the caller passes to backward() is held by the caller: it must come back unchanged,
  // and the gradients must be those of a gradient the engine owns (the same ones, bit for bit).
  for (int64_t rows : {40, 300}) {
    INFO("rows = " << rows);
    Tensor x = fused_leaf32({rows, 48}, 81), w = fused_leaf32({96, 48}, 82),
           b = fused_leaf32({96}, 83);
    Tensor gy = rand32({rows, 96}, 84);
    const std::vector<float> gy_before(gy.data<float>(), gy.data<float>() + gy.numel());
    linear_gelu(x, w, b).backward(gy);
    CHECK(std::vector<float>(gy.data<float>(), gy.data<float>() + gy.numel()) == gy_before);
    const std::vector<float> gx(x.grad().data<float>(), x.grad().data<float>() + x.numel());
    const std::vector<float> gw(w.grad().data<float>(), w.grad().data<float>() + w.numel());
    x.zero_grad(), w.zero_grad(), b.zero_grad();
    // The same gradient made inside the graph (a product's fresh output): owned by the engine.
    sum(mul(linear_gelu(x, w, b), gy)).backward();
    CHECK(std::vector<float>(x.grad().data<float>(), x.grad().data<float>() + x.numel()) == gx);
    CHECK(std::vector<float>(w.grad().data<float>(), w.grad().data<float>() + w.numel()) == gw);
  }
}

TEST_CASE(
    "fused: a layer's input gradient adds into the one pending, the engine's sum bit for bit") {
  // x (not a leaf) feeds two linear layers: the first rule to run gives x a fresh gradient, the
  // second adds its product into it (take_pending_gradient, beta = 1). The result must be the
  // engine's sum of the two products (one addition: its order does not matter): the same bits on
  // the tall kernel (300 rows), within float32 rounding where OpenBLAS multiplies (40 rows).
  for (int64_t rows : {40, 300}) {
    INFO("rows = " << rows);
    Tensor a = fused_leaf32({rows, 48}, 91);
    Tensor w1 = fused_leaf32({40, 48}, 92), b1 = fused_leaf32({40}, 93),
           w2 = fused_leaf32({56, 48}, 94), b2 = fused_leaf32({56}, 95);
    Tensor c1 = rand32({rows, 40}, 100), c2 = rand32({rows, 56}, 101);
    Tensor x = mul(a, 2.0);
    add(sum(mul(linear(x, w1, b1), c1)), sum(mul(linear(x, w2, b2), c2))).backward();
    NoGradGuard no_grad;
    const std::vector<float> got = a.grad().to_float_vector();
    const std::vector<float> want = mul(add(matmul(c1, w1), matmul(c2, w2)), 2.0).to_float_vector();
    REQUIRE(got.size() == want.size());
    if (rows == 300) {
      CHECK(got == want);
    } else {
      for (size_t i = 0; i < got.size(); ++i)
        CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("fused: gradcheck scale_shift with and without the shift, and on a view") {
  Inputs in{rand64({2, 3, 5}, 30), rand64({5}, 31), rand64({5}, 32)};
  CHECK_GRADS([](const Inputs& x) { return scale_shift(x[0], x[1], x[2]); }, in);
  CHECK_GRADS([](const Inputs& x) { return scale_shift(x[0], x[1], Tensor()); }, in);
  CHECK_GRADS([](const Inputs& x) { return scale_shift(transpose(x[0], 0, 2), x[1], x[2]); },
              (Inputs{rand64({2, 3, 4}, 33), rand64({2}, 34), rand64({2}, 35)}));
}

TEST_CASE("fused: scale_shift agrees with mul and add in float32 (ResMLP's affine map)") {
  // 300 rows: the column sums cross several of the kernel's row chunks.
  Inputs in{fused_leaf32({3, 100, 48}, 36), fused_leaf32({48}, 37), fused_leaf32({48}, 38)};
  check_fused_agrees(
      [](const Inputs& x) { return std::vector<Tensor>{scale_shift(x[0], x[1], x[2])}; },
      [](const Inputs& x) { return std::vector<Tensor>{add(mul(x[0], x[1]), x[2])}; }, in);
  check_fused_agrees(
      [](const Inputs& x) { return std::vector<Tensor>{scale_shift(x[0], x[1], Tensor())}; },
      [](const Inputs& x) { return std::vector<Tensor>{mul(x[0], x[1])}; }, in);
}

TEST_CASE("fused: residual + dropout + layer norm agrees with add, dropout_mask and layer_norm") {
  for (double p : {0.0, 0.1, 0.5}) {
    INFO("p = " << p);
    Shape shape{3, 7, 32};
    Inputs in{fused_leaf32(shape, 30), fused_leaf32(shape, 31), fused_leaf32({32}, 32),
              fused_leaf32({32}, 33)};
    uint64_t seed = 4242;
    check_fused_agrees(
        [=](const Inputs& x) {
          ResidualNorm r = add_dropout_layer_norm(x[0], x[1], p, seed, x[2], x[3]);
          return std::vector<Tensor>{r.sum, r.normed};
        },
        [=](const Inputs& x) {
          Tensor h = p > 0 ? mul(x[1], mask_of(shape, p, seed)) : x[1];
          Tensor s = add(x[0], h);
          return std::vector<Tensor>{s, layer_norm(s, x[2], x[3])};
        },
        in);
    check_fused_agrees(
        [=](const Inputs& x) { return std::vector<Tensor>{add_dropout(x[0], x[1], p, seed)}; },
        [=](const Inputs& x) {
          Tensor h = p > 0 ? mul(x[1], mask_of(shape, p, seed)) : x[1];
          return std::vector<Tensor>{add(x[0], h)};
        },
        in);
  }
}

TEST_CASE("fused: dropout draws the dropout_mask kernel's mask, forward and backward") {
  Shape shape{5, 301};
  Tensor x = fused_leaf32(shape, 40);
  check_fused_agrees(
      [](const Inputs& v) { return std::vector<Tensor>{dropout(v[0], 0.3, true, 99)}; },
      [&](const Inputs& v) { return std::vector<Tensor>{mul(v[0], mask_of(shape, 0.3, 99))}; },
      Inputs{x});
}

TEST_CASE("fused: bad shapes name the op and both shapes") {
  Tensor x = rand32({2, 3}, 50), h = rand32({2, 4}, 51), b = rand32({4}, 52);
  CHECK_THROWS_WITH(add_dropout(x, h, 0.1, 1),
                    doctest::Contains("add_dropout: residual [2,3] and branch [2,4]"));
  CHECK_THROWS_WITH(bias_gelu(x, b), doctest::Contains("bias_gelu: input [2,3] needs a bias of "
                                                       "shape [3], got [4]"));
  CHECK_THROWS_WITH(add_dropout_layer_norm(x, x, 0.0, 1, b, Tensor()),
                    doctest::Contains("add_dropout_layer_norm: input [2,3] needs gain/bias"));
  CHECK_THROWS_WITH(add_dropout(x, x, 1.0, 1), doctest::Contains("must be in [0, 1)"));
  Tensor w1 = rand32({5, 3}, 53), b1 = rand32({5}, 54), w2 = rand32({2, 4}, 55);
  CHECK_THROWS_WITH(feed_forward(x, w1, b1, w2, Tensor()),
                    doctest::Contains("feed_forward: second weight [2,4] must be [out, 5] after "
                                      "the first [5,3]"));
  CHECK_THROWS_WITH(feed_forward(x, w1, b, rand32({2, 5}, 56), Tensor()),
                    doctest::Contains("feed_forward (first layer): weight [5,3] needs a bias of "
                                      "shape [5], got [4]"));
  CHECK_THROWS_WITH(linear(x, w1, b), doctest::Contains("linear: weight [5,3] needs a bias of "
                                                        "shape [5], got [4]"));
  CHECK_THROWS_WITH(scale_shift(x, b, Tensor()),
                    doctest::Contains("scale_shift: input [2,3] needs a scale and shift of "
                                      "shape [3], got [4]"));
}

TEST_CASE(
    "fused: a translator's training step takes every biased linear layer through "
    "gemm_epilogue (MIXLAB_DEBUG table)") {
  // The command line, traced: no separate bias or GELU pass is left, forward or backward.
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  {
    std::ofstream pairs(dir + "/pairs.tsv");
    for (int i = 0; i < 120; ++i) pairs << "w" << i % 5 << " w" << i % 3 << "\tw" << i % 3 << "\n";
  }
  testing::Exit e =
      testing::run_app({"translate", "train", "--data", dir + "/pairs.tsv", "--dim", "16",
                        "--heads", "2", "--layers", "1", "--batch", "8", "--steps", "2",
                        "--threads", "1", "--quiet", "--out", dir + "/run"},
                       dir + "/log.txt", {{"MIXLAB_DEBUG", "1"}});
  INFO(e.output);
  REQUIRE(e.code == 0);
  std::map<std::string, long long> calls = testing::kernel_call_counts(e.output);
  CHECK(calls["gemm_epilogue"] > 0);
  CHECK(calls.count("bias_act") == 0);
  CHECK(calls.count("bias_gelu_backward") == 0);
}

// External attention's memory weights: 21 tokens, of which example 1 has its last 8 invalid and
// example 2 none valid. The float32 kernel runs along the slots: 13 of them are a whole vector
// register and a tail of 5 with AVX2 (a tail of 13 with AVX-512), and two heads' 26 columns three
// registers and a tail of 2.
namespace {
Tensor token_marks(int64_t batch, int64_t tokens, DType dtype) {
  std::vector<double> marks(static_cast<size_t>(batch * tokens), 1.0);
  for (int64_t n = tokens - 8; n < tokens; ++n) marks[tokens + n] = 0.0;
  for (int64_t n = 0; n < tokens; ++n) marks[2 * tokens + n] = 0.0;
  return Tensor::from_data(marks, {batch, tokens}).to(dtype);
}
}  // namespace

// Logits [B, N, G, S] = [3, 21, 2, 13]: the softmax runs down the tokens (axis 1), the
// normalisation over the slots (the last axis).
TEST_CASE("fused: token_softmax_normalize agrees with masked softmax then sum_normalize") {
  const Tensor valid = token_marks(3, 21, DType::F32);
  check_fused_agrees(
      [&](const Inputs& x) {
        return std::vector<Tensor>{token_softmax_normalize(x[0], Tensor(), valid, 1e-9)};
      },
      [&](const Inputs& x) {
        Tensor mask = reshape(valid, {3, 21, 1, 1});
        Tensor p =
            transpose(mixers::masked_softmax(transpose(x[0], 1, 3), transpose(mask, 1, 3)), 1, 3);
        return std::vector<Tensor>{sum_normalize(p, -1, 1e-9)};
      },
      Inputs{fused_leaf32({3, 21, 2, 13}, 60)});
  const Tensor valid64 = token_marks(3, 21, DType::F64);
  CHECK_GRADS([&](const Inputs& x) { return token_softmax_normalize(x[0], x[1], valid64, 1e-3); },
              (Inputs{rand64({3, 21, 2, 5}, 61), rand64({5}, 65)}));
  CHECK_GRADS(
      [](const Inputs& x) { return token_softmax_normalize(x[0], Tensor(), Tensor(), 1e-3); },
      (Inputs{rand64({2, 7, 4}, 62)}));
}

TEST_CASE(
    "fused: token_softmax_normalize's slot bias cancels, and its gradient is the unfused one") {
  // The bias is constant along each slot's column of tokens, so the softmax cancels it: the
  // weights are those without it, and its gradient (what add's broadcast rule sums) is 0 up to
  // rounding.
  const Tensor valid = token_marks(3, 21, DType::F64);
  Tensor logits = rand64({3, 21, 2, 16}, 66), bias = rand64({16}, 67);
  Tensor with = token_softmax_normalize(logits, bias, valid, 1e-9);
  Tensor without = token_softmax_normalize(logits.detach(), Tensor(), valid, 1e-9);
  CHECK(with.to_double_vector() == without.to_double_vector());
  Tensor up = rand64({3, 21, 2, 16}, 68, false);
  sum(mul(with, up)).backward();
  Tensor bias2 = bias.detach().clone().set_requires_grad();
  Tensor shifted = transpose(add(logits.detach(), bias2), 1, 3);  // [B, S, G, N]
  Tensor unfused = sum_normalize(
      transpose(mixers::masked_softmax(shifted, reshape(valid, {3, 1, 1, 21})), 1, 3), -1, 1e-9);
  sum(mul(unfused, up)).backward();
  const std::vector<double> fused_db = bias.grad().to_double_vector(),
                            unfused_db = bias2.grad().to_double_vector();
  double largest = 0;
  for (double v : logits.grad().to_double_vector()) largest = std::max(largest, std::abs(v));
  for (size_t s = 0; s < fused_db.size(); ++s) {
    INFO("slot " << s << ": " << fused_db[s] << " vs " << unfused_db[s]);
    CHECK(std::abs(fused_db[s]) <= 1e-12 * largest * 2 * 21);
    CHECK(std::abs(fused_db[s] - unfused_db[s]) <= 1e-12 * largest * 2 * 21);
  }
}

// External attention hands its logits over as an rvalue: the weights go into their memory, and
// dL into dW's when the engine holds dW alone. The values must be those of fresh memory, bit for
// bit, and memory that anyone else can still read must be left as it was.
TEST_CASE("fused: token_softmax_normalize writes over memory nobody else holds, the same bits") {
  const Shape shape{3, 21, 2, 13};
  const Tensor valid = token_marks(3, 21, DType::F32);
  Tensor a = fused_leaf32(shape, 70);
  const Tensor up = rand32(shape, 71);
  const auto values = [](const Tensor& t) { return t.to_float_vector(); };
  // Fresh memory both ways: logits a caller keeps, and a gradient the caller holds.
  Tensor kept = mul(a, 2.0);
  const std::vector<float> up_before = values(up), kept_before = values(kept);
  Tensor fresh = token_softmax_normalize(kept, Tensor(), valid, 1e-9);
  fresh.backward(up);
  CHECK(values(up) == up_before);
  CHECK(values(kept) == kept_before);
  const std::vector<float> grad_fresh = values(a.grad());
  a.zero_grad();
  // In place both ways: logits made for this call alone, and the gradient mul's rule makes.
  Tensor logits = mul(a, 2.0);
  const void* logits_memory = logits.impl().storage->data;
  Tensor over = token_softmax_normalize(std::move(logits), Tensor(), valid, 1e-9);
  CHECK(over.impl().storage->data == logits_memory);
  CHECK(values(over) == values(fresh));
  sum(mul(over, up)).backward();
  CHECK(values(a.grad()) == grad_fresh);
  // An rvalue that shares its memory with a tensor still alive (a view of it) is not written over.
  Tensor live = mul(a, 2.0);
  const std::vector<float> live_before = values(live);
  Tensor beside = token_softmax_normalize(reshape(live, {3, 21, 26, 1}), Tensor(), valid, 1e-9);
  CHECK(values(live) == live_before);
  CHECK(beside.impl().storage != live.impl().storage);
}

TEST_CASE("fused: token_softmax_normalize ignores what invalid tokens hold, and gives them 0") {
  const Shape shape{3, 21, 2, 13};  // [B, N, G, S]
  const int64_t total = 3 * 21 * 2 * 13;
  for (DType dtype : {DType::F32, DType::F64}) {
    const Tensor valid = token_marks(3, 21, dtype);
    std::vector<double> plain = rand64(shape, 63, false).to_double_vector();
    std::vector<double> wild = plain;
    const auto invalid = [](int64_t i) {  // example 1's last 8 tokens, all of example 2's
      const int64_t ex = i / (21 * 2 * 13), n = (i / (2 * 13)) % 21;
      return ex == 2 || (ex == 1 && n >= 21 - 8);
    };
    for (int64_t i = 0; i < total; ++i)
      if (invalid(i)) wild[i] = i % 2 ? 1e30 : std::numeric_limits<double>::quiet_NaN();
    Tensor a = Tensor::from_data(plain, shape).to(dtype).set_requires_grad();
    Tensor b = Tensor::from_data(wild, shape).to(dtype).set_requires_grad();
    Tensor wa = token_softmax_normalize(a, Tensor(), valid, 1e-9),
           wb = token_softmax_normalize(b, Tensor(), valid, 1e-9);
    CHECK(wa.to_double_vector() == wb.to_double_vector());
    Tensor up = rand64(shape, 64, false).to(dtype);
    sum(mul(wa, up)).backward();
    sum(mul(wb, up)).backward();
    CHECK(a.grad().to_double_vector() == b.grad().to_double_vector());
    const std::vector<double> w = wb.to_double_vector(), g = b.grad().to_double_vector();
    for (int64_t i = 0; i < total; ++i)
      if (invalid(i)) {
        INFO("element " << i);
        CHECK(w[i] == 0.0);
        CHECK(g[i] == 0.0);
      }
  }
}
