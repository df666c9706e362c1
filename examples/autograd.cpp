// autograd: reverse-mode differentiation on tensors, micrograd-sized.
//
// Part 1 is micrograd's first example: L = (a·b + c)·f for scalars, whose gradients are known by
// hand (dL/da = f·b, dL/db = f·a, dL/dc = f, dL/df = a·b + c). Part 2 fits a two-layer MLP to
// XOR with nothing but tensor ops, backward() and a hand-written gradient step.
//
// Expected output:
//   L = -8
//   dL/da = 6, dL/db = -4, dL/dc = -2, dL/df = 4
//   step 0: loss 0.2776
//   step 100: loss 0.0040
//   step 200: loss 0.0015
//   step 300: loss 0.0009
//   step 400: loss 0.0006
//   xor(0,0) = 0, xor(0,1) = 1, xor(1,0) = 1, xor(1,1) = 0
#include <cstdio>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"

using namespace mixlab;

// A float64 leaf that collects gradients.
Tensor leaf(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_data(values, shape).set_requires_grad();
}

int main() {
  // ---- Part 1: one expression and its gradients ----
  Tensor a = leaf({2.0}, {}), b = leaf({-3.0}, {}), c = leaf({10.0}, {}), f = leaf({-2.0}, {});
  Tensor L = (a * b + c) * f;
  L.backward();
  std::printf("L = %g\n", L.item());
  std::printf("dL/da = %g, dL/db = %g, dL/dc = %g, dL/df = %g\n", a.grad().item(), b.grad().item(),
              c.grad().item(), f.grad().item());

  // ---- Part 2: an MLP learns XOR ----
  Generator gen(0);
  Tensor x = Tensor::from_data(std::vector<double>{0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  Tensor y = Tensor::from_data(std::vector<double>{0, 1, 1, 0}, {4, 1});
  std::vector<Tensor> params = {
      Tensor::normal({2, 8}, 0.0, 1.0, gen, DType::F64).set_requires_grad(),  // w1
      Tensor::zeros({8}, DType::F64).set_requires_grad(),                     // b1
      Tensor::normal({8, 1}, 0.0, 1.0, gen, DType::F64).set_requires_grad(),  // w2
      Tensor::zeros({1}, DType::F64).set_requires_grad()};                    // b2
  auto predict = [&](const Tensor& in) {
    Tensor h = tanh(matmul(in, params[0]) + params[1]);
    return sigmoid(matmul(h, params[2]) + params[3]);
  };
  for (int step = 0; step <= 400; ++step) {
    Tensor diff = predict(x) - y;
    Tensor loss = mean(diff * diff);
    for (Tensor& p : params) p.zero_grad();
    loss.backward();
    {
      NoGradGuard no_grad;  // the update itself is not part of any graph
      for (Tensor& p : params) p.copy_(p - p.grad() * 2.0);
    }
    if (step % 100 == 0) std::printf("step %d: loss %.4f\n", step, loss.item());
  }
  std::vector<double> out = predict(x).to_double_vector();
  std::printf("xor(0,0) = %d, xor(0,1) = %d, xor(1,0) = %d, xor(1,1) = %d\n", out[0] > 0.5,
              out[1] > 0.5, out[2] > 0.5, out[3] > 0.5);
}
