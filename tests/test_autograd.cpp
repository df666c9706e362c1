// Autograd mechanics: accumulation, no-grad scopes, deep graphs, shared subexpressions,
// freed graphs, errors and determinism.
#include "autograd/grad_mode.h"
#include "autograd/gradient_routing.h"
#include "autograd/node.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

TEST_CASE("autograd: gradients accumulate over two backward calls until zero_grad") {
  Tensor x = Tensor::from_data(std::vector<double>{1, 2, 3}, {3}).set_requires_grad();
  Tensor y = sum(mul(x, x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(x.grad().to_double_vector() == std::vector<double>{4, 8, 12});
  x.zero_grad();
  CHECK(!x.grad().defined());
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("already freed"), Error);
}

TEST_CASE("autograd: a no-grad scope records nothing") {
  Tensor x = rand64({3}, 1);
  {
    NoGradGuard guard;
    Tensor y = exp(x);
    CHECK(!y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  CHECK(exp(x).grad_fn() != nullptr);
  CHECK(!exp(x.detach()).requires_grad());
}

TEST_CASE("autograd: a 10000-op chain backpropagates without stack overflow") {
  Tensor x = Tensor::from_data(std::vector<double>{1.0}, {1}).set_requires_grad();
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = add(y, 0.001);
  sum(y).backward();
  CHECK(x.grad().item() == 1.0);
  // And a chain that is dropped without backward is destroyed iteratively.
  Tensor z = x;
  for (int i = 0; i < 200000; ++i) z = mul(z, 1.0);
  z = Tensor();
}

// The graph keeps a parent an op made as its place only: the memory of an intermediate that no
// rule reads goes as soon as the forward pass lets go of it, while one a rule reads lives until
// its backward, and the gradients are the same either way.
TEST_CASE("autograd: an intermediate no rule reads is freed at once, one a rule reads is kept") {
  Tensor x = rand64({64, 64}, 3).set_requires_grad();
  std::weak_ptr<Storage> unread, read;
  Tensor y;
  {
    Tensor h = add(x, 1.0);  // add's rule reads no values: h is only an edge of the graph
    Tensor k = exp(x);       // mul's rule reads both factors: k stays for the backward
    unread = h.impl().storage;
    read = k.impl().storage;
    y = sum(mul(add(h, h), k));
  }
  CHECK(unread.expired());
  CHECK(!read.expired());
  y.backward();
  // d/dx Σ 2(x + 1)·eˣ = 2eˣ + 2(x + 1)eˣ
  const std::vector<double> xs = x.to_double_vector(), gs = x.grad().to_double_vector();
  for (size_t i = 0; i < xs.size(); ++i)
    CHECK(gs[i] == doctest::Approx(2 * std::exp(xs[i]) * (xs[i] + 2)).epsilon(1e-12));
  CHECK(read.expired());  // gone with the graph once the backward pass used it
}

TEST_CASE("autograd: shared subexpressions get summed gradients") {
  Tensor x = Tensor::from_data(std::vector<double>{2.0}, {1}).set_requires_grad();
  Tensor s = mul(x, 3.0);        // s = 3x
  Tensor y = add(mul(s, s), s);  // y = 9x² + 3x, dy/dx = 18x + 3
  sum(y).backward();
  CHECK(x.grad().item() == doctest::Approx(39.0));
}

TEST_CASE("autograd: gradients summed in place never change a tensor someone else holds") {
  // s has two consumers whose rules return a tensor they keep (`kept`) and a view of it: the
  // engine must sum them into a fresh tensor, not into the first. Then a case where the engine
  // holds the gradients alone and sums them in place.
  Tensor x = Tensor::from_data(std::vector<double>{1, 2, 3}, {3}).set_requires_grad();
  Tensor s = mul(x, 2.0);
  Tensor kept = Tensor::from_data(std::vector<double>{10, 20, 30}, {3});
  Tensor view_of_kept = reshape(kept, {3});
  auto probe = [](const Tensor& in, const Tensor& grad) {
    Tensor out = in.detach().clone();
    return record("probe", out, {in}, [grad](const Tensor&) { return std::vector<Tensor>{grad}; });
  };
  sum(add(probe(s, kept), probe(s, view_of_kept))).backward();
  CHECK(kept.to_double_vector() == std::vector<double>{10, 20, 30});
  CHECK(x.grad().to_double_vector() == std::vector<double>{40, 80, 120});  // 2 (kept + kept)
  // Gradients the engine alone holds are summed in place: the same values.
  Tensor x2 = Tensor::from_data(std::vector<double>{1, 2, 3}, {3}).set_requires_grad();
  Tensor s2 = mul(x2, 2.0);
  sum(add(add(mul(s2, s2), mul(s2, 3.0)), exp(s2))).backward();
  for (int i = 0; i < 3; ++i) {
    const double v = 2.0 * (i + 1);
    CHECK(x2.grad().to_double_vector()[i] == doctest::Approx(2 * (2 * v + 3 + std::exp(v))));
  }
}

TEST_CASE("autograd: a rule adds its gradient to the one pending for its input, only its own") {
  // s feeds `adder` (whose rule takes s's pending gradient and adds to it) and mul(s, 3). With
  // mul first in the backward order, adder finds 3 pending; first itself, nothing.
  auto adder = [](const Tensor& in, std::vector<bool>& found) {
    return record("adder", in.detach().clone(), {in}, [in, &found](const Tensor& grad) {
      Tensor pending = take_pending_gradient(in, in.shape(), in.dtype(), in.device());
      found.push_back(pending.defined());
      return std::vector<Tensor>{pending.defined() ? add(pending, grad) : grad};
    });
  };
  for (bool adder_first_in_sum : {true, false}) {
    CAPTURE(adder_first_in_sum);
    Tensor x = Tensor::from_data(std::vector<double>{1, 2, 3}, {3}).set_requires_grad();
    Tensor s = mul(x, 2.0);
    std::vector<bool> found;
    Tensor a = sum(adder(s, found)), m = sum(mul(s, 3.0));
    // The engine runs the consumers in the reverse of a depth-first order from the root: the
    // sum's second operand's branch first.
    (adder_first_in_sum ? add(a, m) : add(m, a)).backward();
    CHECK(found == std::vector<bool>{adder_first_in_sum && !plain_autograd()});
    CHECK(x.grad().to_double_vector() == std::vector<double>{8, 8, 8});  // 2 (1 + 3)
  }
  // A pending gradient someone else holds is not handed out: here `kept`, returned by a probe.
  Tensor x = Tensor::from_data(std::vector<double>{1, 2, 3}, {3}).set_requires_grad();
  Tensor s = mul(x, 2.0);
  Tensor kept = Tensor::from_data(std::vector<double>{10, 20, 30}, {3});
  Tensor probe = record("probe", s.detach().clone(), {s},
                        [kept](const Tensor&) { return std::vector<Tensor>{kept}; });
  std::vector<bool> found;
  sum(add(sum(adder(s, found)), sum(probe))).backward();
  CHECK(found == std::vector<bool>{false});
  CHECK(kept.to_double_vector() == std::vector<double>{10, 20, 30});
  CHECK(x.grad().to_double_vector() == std::vector<double>{22, 42, 62});  // 2 (1 + kept)
}

TEST_CASE("autograd: backward with an explicit upstream gradient") {
  Tensor x = Tensor::from_data(std::vector<double>{1, 2}, {2}).set_requires_grad();
  Tensor y = mul(x, 5.0);
  y.backward(Tensor::from_data(std::vector<double>{1, 10}, {2}));
  CHECK(x.grad().to_double_vector() == std::vector<double>{5, 50});
  Tensor z = mul(x, 2.0);
  CHECK_THROWS_WITH_AS(z.backward(), doctest::Contains("single-element"), Error);
}

TEST_CASE("errors: shape mismatches name the op and both shapes") {
  Tensor a = Tensor::zeros({32, 64}), b = Tensor::zeros({32, 64});
  CHECK_THROWS_WITH_AS(matmul(a, b), "matmul: [32,64] x [32,64]: inner dimensions 64 and 32 differ",
                       Error);
  CHECK_THROWS_WITH_AS(add(Tensor::zeros({2, 3}), Tensor::zeros({4})),
                       doctest::Contains("add: [2,3] and [4] cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(reshape(a, {5, -1}), doctest::Contains("[32,64]"), Error);
  CHECK_THROWS_WITH_AS(add(Tensor::zeros({2}), Tensor::zeros({2}, DType::F64)),
                       doctest::Contains("dtypes differ"), Error);
  CHECK_THROWS_WITH_AS(
      embedding(Tensor::zeros({4, 2}), Tensor::from_data(std::vector<int32_t>{4}, {1})),
      doctest::Contains("index 4 is out of range"), Error);
  // Index checks (Backend::check_indices) name the op, the value and the limit; on the CPU at
  // once (a GPU reports them at its next wait: test_cuda_backend.cpp).
  CHECK_THROWS_WITH_AS(
      embedding(Tensor::zeros({37, 32}), Tensor::from_data(std::vector<int32_t>{3, -1}, {2})),
      "embedding: index -1 is out of range for a table of shape [37,32]", Error);
  CHECK_THROWS_WITH_AS(
      embedding(Tensor::zeros({0, 2}), Tensor::from_data(std::vector<int32_t>{0}, {1})),
      "embedding: index 0 is out of range for a table of shape [0,2]", Error);
  CHECK_THROWS_WITH_AS(cross_entropy(Tensor::zeros({3, 10}),
                                     Tensor::from_data(std::vector<int32_t>{1, -100, 10}, {3})),
                       "cross_entropy: target 10 is out of range for 10 classes", Error);
  CHECK_NOTHROW(cross_entropy(Tensor::zeros({3, 10}),
                              Tensor::from_data(std::vector<int32_t>{1, -100, 9}, {3})));
  CHECK_THROWS_WITH_AS(
      fft2_real(Tensor::zeros({2, 4, 3}), Tensor::from_data(std::vector<int32_t>{4, 5}, {2})),
      "fft2_real: length 5 outside [0, 4]", Error);
  CHECK_THROWS_WITH_AS(concat({Tensor::zeros({2, 3}), Tensor::zeros({3, 3})}, 1),
                       doctest::Contains("[2,3] and [3,3]"), Error);
}

TEST_CASE("errors: mixing devices is an error not a silent copy") {
  if (!device_available(DeviceType::CUDA)) {
    CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::F32, Device::cuda()), doctest::Contains("cuda"),
                         Error);
    return;
  }
  CHECK_THROWS_WITH_AS(add(Tensor::zeros({2}), Tensor::zeros({2}, DType::F32, Device::cuda())),
                       doctest::Contains("different devices"), Error);
}

TEST_CASE("determinism: the same seeded computation twice is bit-identical") {
  auto run = [] {
    Generator gen(42);
    Tensor w = Tensor::normal({64, 64}, 0, 0.1, gen).set_requires_grad();
    Tensor x = Tensor::uniform({8, 16, 64}, -1, 1, gen);
    Tensor y = layer_norm(gelu(matmul(x, w)), Tensor(), Tensor());
    Tensor loss = sum(mul(softmax(dropout(y, 0.1, true, 3)), y));
    loss.backward();
    auto out = w.grad().to_float_vector();
    out.push_back(static_cast<float>(loss.item()));
    return out;
  };
  CHECK(run() == run());
}

TEST_CASE("autograd: gradcheck catches a wrong backward rule") {
  auto wrong_square = [](const std::vector<Tensor>& x) {
    Tensor y;
    {
      NoGradGuard no_grad;
      y = mul(x[0], x[0]);
    }
    // Claims d(x²)/dx = x instead of 2x.
    return record("wrong_square", y, {x[0]},
                  [x0 = x[0]](const Tensor& g) { return std::vector<Tensor>{mul(g, x0)}; });
  };
  auto result = gradcheck(wrong_square, {rand64({4}, 3)});
  CHECK(!result.ok);
  CHECK(result.worst.find("input 0") != std::string::npos);
}
