// Finite-difference gradient checks in float64 for every differentiable op, including
// broadcasting and non-contiguous (transposed, sliced) inputs.
#include "core/parallel.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;
using Inputs = std::vector<Tensor>;

TEST_CASE("gradcheck: add sub mul div with broadcasting") {
  Inputs in{rand64({3, 4}, 1), rand64({4}, 2)};
  CHECK_GRADS([](const Inputs& x) { return add(x[0], x[1]); }, in);
  CHECK_GRADS([](const Inputs& x) { return sub(x[1], x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return mul(x[0], x[1]); }, in);
  Inputs pos{rand64({3, 1}, 3), add(mul(rand64({1, 4}, 4, false), 0.5), 2.0).set_requires_grad()};
  CHECK_GRADS([](const Inputs& x) { return div(x[0], x[1]); }, pos);
  CHECK_GRADS([](const Inputs& x) { return add(mul(x[0], 3.0), 1.5); }, in);
}

TEST_CASE("gradcheck: unary ops") {
  Inputs in{rand64({2, 5}, 5)};
  Tensor positive = add(mul(rand64({2, 5}, 6, false), 0.4), 1.0).set_requires_grad();
  CHECK_GRADS([](const Inputs& x) { return neg(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return exp(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return log(x[0]); }, Inputs{positive});
  CHECK_GRADS([](const Inputs& x) { return sqrt(x[0]); }, Inputs{positive});
  CHECK_GRADS([](const Inputs& x) { return pow(x[0], 2.5); }, Inputs{positive});
  CHECK_GRADS([](const Inputs& x) { return abs(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return relu(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return gelu(x[0], GeluForm::Erf); }, in);
  CHECK_GRADS([](const Inputs& x) { return gelu(x[0], GeluForm::Tanh); }, in);
  CHECK_GRADS([](const Inputs& x) { return sigmoid(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return tanh(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return sin(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return cos(x[0]); }, in);
}

TEST_CASE("gradcheck: matmul batched and broadcast with transposed inputs") {
  CHECK_GRADS([](const Inputs& x) { return matmul(x[0], x[1]); },
              (Inputs{rand64({3, 4}, 7), rand64({4, 5}, 8)}));
  CHECK_GRADS([](const Inputs& x) { return matmul(x[0], x[1]); },
              (Inputs{rand64({2, 3, 4}, 9), rand64({2, 4, 2}, 10)}));
  CHECK_GRADS([](const Inputs& x) { return matmul(x[0], x[1]); },
              (Inputs{rand64({2, 2, 3, 4}, 11), rand64({4, 5}, 12)}));
  CHECK_GRADS([](const Inputs& x) { return matmul(x[0], x[1]); },
              (Inputs{rand64({2, 1, 3, 4}, 13), rand64({3, 4, 2}, 14)}));
  // Transposed views on both sides reach gemm as flags.
  CHECK_GRADS([](const Inputs& x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); },
              (Inputs{rand64({4, 3}, 15), rand64({5, 4}, 16)}));
  // Head-split views [B, H, N, D] of [B, N, H·D] tensors: a two-level batch grid, no copy.
  CHECK_GRADS(
      [](const Inputs& x) {
        auto split = [](const Tensor& t) { return transpose(reshape(t, {2, 3, 2, 4}), 1, 2); };
        return matmul(split(x[0]), transpose(split(x[1]), -1, -2));
      },
      (Inputs{rand64({2, 3, 8}, 20), rand64({2, 3, 8}, 21)}));
  CHECK_GRADS([](const Inputs& x) { return matmul(x[0], x[1]); },
              (Inputs{rand64({2, 3, 2, 3, 4}, 22), rand64({3, 1, 4, 2}, 23)}));
  CHECK_GRADS([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
              (Inputs{rand64({2, 3, 4}, 17), rand64({5, 4}, 18), rand64({5}, 19)}));
  // One operand shared by every example (a synthesizer's weights [1, H, N, N] against head-split
  // values): its gradient is summed by the products over the batch.
  auto split = [](const Tensor& t) { return transpose(reshape(t, {2, 3, 2, 4}), 1, 2); };
  CHECK_GRADS([&](const Inputs& x) { return matmul(x[0], split(x[1])); },
              (Inputs{rand64({1, 2, 3, 3}, 24), rand64({2, 3, 8}, 25)}));
  CHECK_GRADS([&](const Inputs& x) { return matmul(split(x[1]), x[0]); },
              (Inputs{rand64({2, 4, 3}, 26), rand64({2, 3, 8}, 27)}));
  CHECK_GRADS([](const Inputs& x) { return matmul(transpose(x[0], -1, -2), x[1]); },
              (Inputs{rand64({3, 2, 4}, 28), rand64({2, 3, 2, 5}, 29)}));
  // One batch axis: a weight [3, 4] (or [1, 2, 3]) applied to each of 5 examples, either side.
  CHECK_GRADS([](const Inputs& x) { return matmul(x[0], x[1]); },
              (Inputs{rand64({3, 4}, 33), rand64({5, 4, 2}, 34)}));
  CHECK_GRADS([](const Inputs& x) { return matmul(x[1], x[0]); },
              (Inputs{rand64({1, 2, 3}, 35), rand64({5, 4, 2}, 36)}));
}

TEST_CASE(
    "matmul: a shared operand's gradient is the sum over the batch, the same bits on 1 "
    "and 2 threads") {
  // A shared by 16 examples of head-split values [16, 4, 49, 32]: per head ([4, 49, 49]: the CPU
  // sums each head's examples on one thread) and one for all heads ([49, 49]: one inner index,
  // the examples cut into chunks). Against the gradient of the same product with A expanded to
  // every example and summed by the expand.
  Tensor v = rand32({16, 49, 128}, 31), w = rand32({16, 4, 49, 32}, 32);
  for (const Shape& shape : {Shape{4, 49, 49}, Shape{49, 49}}) {
    INFO("A " << shape_str(shape));
    Tensor a = rand32(shape, 30);
    auto grad_of_a = [&](bool expanded) {
      Tensor leaf = a.detach().clone().set_requires_grad();
      Tensor heads = transpose(reshape(v, {16, 49, 4, 32}), 1, 2);
      Tensor op = expanded ? contiguous(expand(leaf, {16, 4, 49, 49})) : leaf;
      sum(mul(matmul(op, heads), w)).backward();
      return leaf.grad().to_float_vector();
    };
    const int threads = num_threads();
    set_num_threads(1);
    const auto one = grad_of_a(false), reference = grad_of_a(true);
    set_num_threads(2);
    const auto two = grad_of_a(false);
    set_num_threads(threads);
    CHECK(one == two);
    REQUIRE(one.size() == reference.size());
    for (size_t i = 0; i < one.size(); ++i)
      CHECK(one[i] == doctest::Approx(reference[i]).epsilon(1e-4));
  }
}

TEST_CASE("gradcheck: reductions") {
  Inputs in{rand64({2, 3, 4}, 20)};
  CHECK_GRADS([](const Inputs& x) { return sum(x[0], {1}); }, in);
  CHECK_GRADS([](const Inputs& x) { return sum(x[0], {0, 2}, true); }, in);
  CHECK_GRADS([](const Inputs& x) { return sum(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return mean(x[0], {-1}); }, in);
  CHECK_GRADS([](const Inputs& x) { return mean(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return max(x[0], {1}); }, in);
  CHECK_GRADS([](const Inputs& x) { return max(x[0], {0, 2}, true); }, in);
  // Non-contiguous input.
  CHECK_GRADS([](const Inputs& x) { return sum(transpose(x[0], 0, 2), {1}); }, in);
}

TEST_CASE("gradcheck: softmax log_softmax layer_norm logcumsumexp") {
  Inputs in{rand64({3, 5}, 21)};
  CHECK_GRADS([](const Inputs& x) { return softmax(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return log_softmax(x[0]); }, in);
  CHECK_GRADS([](const Inputs& x) { return softmax(x[0], 0); }, in);
  CHECK_GRADS([](const Inputs& x) { return log_softmax(transpose(x[0], 0, 1)); }, in);
  CHECK_GRADS([](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); },
              (Inputs{rand64({2, 3, 6}, 22), rand64({6}, 23), rand64({6}, 24)}));
  CHECK_GRADS([](const Inputs& x) { return layer_norm(x[0], Tensor(), Tensor()); },
              (Inputs{rand64({4, 6}, 25)}));
  CHECK_GRADS([](const Inputs& x) { return logcumsumexp(x[0], 1); },
              (Inputs{rand64({2, 5, 3}, 26)}));
  CHECK_GRADS([](const Inputs& x) { return logcumsumexp(x[0], -1); }, (Inputs{rand64({3, 4}, 27)}));
}

TEST_CASE("gradcheck: views and copies") {
  Inputs in{rand64({2, 3, 4}, 30)};
  CHECK_GRADS([](const Inputs& x) { return reshape(x[0], {6, 4}); }, in);
  CHECK_GRADS([](const Inputs& x) { return reshape(transpose(x[0], 0, 1), {-1}); }, in);
  CHECK_GRADS([](const Inputs& x) { return permute(x[0], {2, 0, 1}); }, in);
  CHECK_GRADS([](const Inputs& x) { return narrow(x[0], 2, 1, 2); }, in);
  // The whole axis passes its gradient through as it came, here a transposed (strided) one.
  CHECK_GRADS(
      [](const Inputs& x) { return transpose(narrow(transpose(x[0], 1, 2), 1, 0, 4), 0, 2); }, in);
  CHECK_GRADS([](const Inputs& x) { return mul(slice(x[0], 1, 0, 2), slice(x[0], 1, 1, 3)); }, in);
  CHECK_GRADS(
      [](const Inputs& x) {
        return expand(x[1], {2, 3, 4});
      },
      (Inputs{in[0], rand64({3, 1}, 31)}));
  CHECK_GRADS(
      [](const Inputs& x) {
        return concat({x[0], x[1]}, 1);
      },
      (Inputs{rand64({2, 3}, 32), rand64({2, 2}, 33)}));
  CHECK_GRADS(
      [](const Inputs& x) {
        return stack({x[0], x[1]}, 0);
      },
      (Inputs{rand64({2, 3}, 34), rand64({2, 3}, 35)}));
  CHECK_GRADS(
      [](const Inputs& x) {
        auto parts = split(x[0], {1, 3}, -1);
        return mul(sum(parts[0], {-1}, true), parts[1]);
      },
      in);
  CHECK_GRADS([](const Inputs& x) { return contiguous(transpose(x[0], 1, 2)); }, in);
  CHECK_GRADS([](const Inputs& x) { return unsqueeze(squeeze(narrow(x[0], 0, 1, 1), 0), 2); }, in);
  // On a transposed input: views, the gradient goes back through the strides.
  CHECK_GRADS([](const Inputs& x) { return squeeze(unsqueeze(transpose(x[0], 0, 2), 1), 3); },
              (Inputs{rand64({1, 3, 4}, 36)}));
}

TEST_CASE("gradcheck: where masked_fill maximum") {
  Tensor cond = Tensor::from_data(std::vector<double>{1, 0, 1, 0}, {4});
  CHECK_GRADS([cond](const Inputs& x) { return where(cond, x[0], x[1]); },
              (Inputs{rand64({3, 4}, 40), rand64({4}, 41)}));
  Tensor mask = Tensor::from_data(std::vector<double>{0, 1, 0}, {3, 1});
  CHECK_GRADS([mask](const Inputs& x) { return masked_fill(x[0], mask, -5.0); },
              (Inputs{rand64({3, 4}, 42)}));
  CHECK_GRADS([](const Inputs& x) { return maximum(x[0], x[1]); },
              (Inputs{rand64({3, 4}, 43), rand64({3, 4}, 44)}));
}

TEST_CASE("gradcheck: embedding dropout cross_entropy") {
  Tensor ids = Tensor::from_data(std::vector<int32_t>{1, 3, 1, 0, 2, 3}, {2, 3});
  CHECK_GRADS([ids](const Inputs& x) { return embedding(x[0], ids); },
              (Inputs{rand64({4, 5}, 50)}));
  CHECK_GRADS([](const Inputs& x) { return dropout(x[0], 0.3, true, 99); },
              (Inputs{rand64({4, 6}, 51)}));
  Tensor targets = Tensor::from_data(std::vector<int32_t>{2, -100, 0, 4}, {2, 2});
  CHECK_GRADS([targets](const Inputs& x) { return cross_entropy(x[0], targets); },
              (Inputs{rand64({2, 2, 5}, 52)}));
  CHECK_GRADS([targets](const Inputs& x) { return cross_entropy(x[0], targets, -100, 0.1); },
              (Inputs{rand64({2, 2, 5}, 53)}));
}

TEST_CASE("gradcheck: fft and the real part of the 2-D DFT") {
  CHECK_GRADS([](const Inputs& x) { return fft(x[0], 1); }, (Inputs{rand64({2, 5, 3, 2}, 60)}));
  CHECK_GRADS([](const Inputs& x) { return fft(x[0], 0, true); }, (Inputs{rand64({4, 2}, 61)}));
  CHECK_GRADS([](const Inputs& x) { return fft2_real(x[0]); }, (Inputs{rand64({2, 5, 6}, 62)}));
  CHECK_GRADS([](const Inputs& x) { return fft2_real(x[0]); }, (Inputs{rand64({3, 7}, 63)}));
  Tensor lens = Tensor::from_data(std::vector<int32_t>{3, 5}, {2});
  CHECK_GRADS([lens](const Inputs& x) { return fft2_real(x[0], lens); },
              (Inputs{rand64({2, 5, 4}, 64)}));
  CHECK_GRADS([](const Inputs& x) { return fft2_real(transpose(x[0], 1, 2)); },
              (Inputs{rand64({2, 4, 3}, 65)}));
}

TEST_CASE("gradcheck: the circular convolution of the long convolutions") {
  CHECK_GRADS([](const Inputs& x) { return circular_conv(x[0], x[1]); },
              (Inputs{rand64({2, 4, 3}, 64), rand64({7, 3}, 65)}));
  CHECK_GRADS([](const Inputs& x) { return circular_conv(x[0], x[1]); },
              (Inputs{rand64({3, 3, 2}, 66), rand64({8, 2}, 67)}));
  // A strided input (dense copy on the way in).
  CHECK_GRADS([](const Inputs& x) { return circular_conv(transpose(x[0], 1, 2), x[1]); },
              (Inputs{rand64({2, 3, 5}, 68), rand64({9, 3}, 69)}));
}

TEST_CASE("gradcheck: select_rows with repeated rows") {
  Tensor idx = Tensor::from_data(std::vector<int32_t>{2, 0, 2}, {3});
  CHECK_GRADS([idx](const Inputs& x) { return select_rows(x[0], idx); },
              (Inputs{rand64({3, 2, 2}, 70)}));
}

TEST_CASE("gradcheck: take_rows, a partial permutation and its inverse") {
  // Three rows of x to five places (two of them zero), and back.
  Tensor take = Tensor::from_data(std::vector<int32_t>{2, -1, 0, 1, -1}, {5});
  Tensor put = Tensor::from_data(std::vector<int32_t>{2, 3, 0}, {3});
  auto forth = [take, put](const Inputs& x) { return take_rows(x[0], take, put); };
  auto back = [take, put](const Inputs& x) { return take_rows(x[0], put, take); };
  CHECK_GRADS(forth, (Inputs{rand64({3, 2, 2}, 71)}));
  CHECK_GRADS(back, (Inputs{rand64({5, 3}, 72)}));
}
