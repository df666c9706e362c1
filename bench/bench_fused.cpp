// The fused kernels against what they replace, on the shapes of the translator's layers
// (bench/bench_train_step, d = 128, batch 128 of 12 tokens: 1536 rows). Each pair alternates,
// call by call, in one process; prints the median time per call of each and their ratio.
//  1. Where a Linear layer's bias is cheapest to add: (a) the product, then the bias_act kernel
//     adding the bias in place in one row pass (what `linear` does), or (b) the output pre-filled
//     with the bias broadcast (a copy), then the product with beta = 1 (the gemm's epilogue).
//  2. The FFN's GELU backward: bias_gelu_backward against unary (GELU's gradient), binary (mul)
//     and reduce (the bias's column sums).
//  3. The residual branch: add_dropout_layer_norm against dropout_mask, mul, add and layer_norm.
// Run it on a quiet machine.
//
//   build/bench_fused [--threads N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "backends/backend.h"
#include "backends/cpu/openblas_kernels.h"
#include "core/parallel.h"
#include "core/random.h"

using namespace mixlab;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_of(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print_pair(const std::string& name, const std::vector<double>& a,
                const std::vector<double>& b) {
  double ma = median(a) * 1e6, mb = median(b) * 1e6;
  std::printf("%-22s %14.1f %14.1f %8.3f\n", name.c_str(), ma, mb, mb / ma);
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_better_openblas_kernels(argv);  // OpenBLAS's AVX-512 kernels on newer Xeons
  int reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      set_num_threads(std::stoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_fused [--threads N] [--reps R]\n");
      return 2;
    }
  }
  struct Shape3 {
    int64_t m, k, n;
  };
  // rows = 128 sequences x 12 tokens; the attention projections (d -> d), FFN in (d -> 4d), out.
  const int64_t rows = 1536;
  const Shape3 shapes[] = {{rows, 128, 128}, {rows, 128, 512}, {rows, 512, 128}};
  std::printf("%-22s %14s %14s %8s\n", "rows x in -> out", "row pass (us)", "beta=1 (us)", "ratio");
  for (const Shape3& s : shapes) {
    Generator gen(1);
    Tensor x = Tensor::uniform({s.m, s.k}, -1, 1, gen);
    Tensor w = Tensor::uniform({s.n, s.k}, -1, 1, gen);
    Tensor bias = Tensor::uniform({s.n}, -1, 1, gen);
    Tensor out = Tensor::empty({s.m, s.n}, DType::F32, Device::cpu());
    Backend& be = backend_for(Device::cpu());
    GemmArgs g;
    g.trans_b = true;  // x Wᵀ with W stored [out, in]
    g.m = s.m, g.n = s.n, g.k = s.k;
    g.a = x.raw_data(), g.lda = s.k;
    g.b = w.raw_data(), g.ldb = s.k;
    g.c = out.raw_data(), g.ldc = s.n;
    View none;
    View bias_rows = bias.view();  // the bias broadcast over rows: stride 0 on the row axis
    bias_rows.ndim = 2;
    bias_rows.shape[0] = s.m, bias_rows.shape[1] = s.n;
    bias_rows.strides[0] = 0, bias_rows.strides[1] = 1;
    auto row_pass = [&] {
      g.beta = 0.0;
      be.gemm(g);
      be.bias_act(out.view(), bias.view(), out.view(), none, s.m, s.n);
    };
    auto epilogue = [&] {
      be.copy(bias_rows, out.view());
      g.beta = 1.0;
      be.gemm(g);
    };
    row_pass();
    epilogue();
    std::vector<double> a, b;
    for (int r = 0; r < reps; ++r) {
      a.push_back(seconds_of(row_pass));
      b.push_back(seconds_of(epilogue));
    }
    std::string name =
        std::to_string(s.m) + " x " + std::to_string(s.k) + " -> " + std::to_string(s.n);
    print_pair(name, a, b);
  }
  Backend& be = backend_for(Device::cpu());
  std::printf("\n%-22s %14s %14s %8s\n", "[rows, cols]", "fused (us)", "unfused (us)", "ratio");
  {
    const int64_t cols = 512;
    Generator gen(2);
    Tensor dy = Tensor::uniform({rows, cols}, -1, 1, gen),
           pre = Tensor::uniform({rows, cols}, -3, 3, gen);
    Tensor dx = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
    Tensor grad = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
    Tensor dbias = Tensor::empty({cols}, DType::F32, Device::cpu());
    auto fused = [&] {
      be.bias_gelu_backward(dy.view(), pre.view(), dx.view(), dbias.view(), rows, cols);
    };
    auto unfused = [&] {
      be.unary(UnaryOp::GeluErfGrad, pre.view(), grad.view(), 0.0);
      be.binary(BinaryOp::Mul, dy.view(), grad.view(), dx.view());
      be.reduce(ReduceOp::Sum, dx.view(), 1, rows, cols, dbias.view());
    };
    std::vector<double> a, b;
    for (int r = 0; r < reps; ++r) {
      a.push_back(seconds_of(fused));
      b.push_back(seconds_of(unfused));
    }
    print_pair("GELU bwd [1536, 512]", a, b);
  }
  {
    const int64_t cols = 128;
    const double p = 0.1;
    Generator gen(3);
    Tensor x = Tensor::uniform({rows, cols}, -1, 1, gen),
           h = Tensor::uniform({rows, cols}, -1, 1, gen);
    Tensor gamma = Tensor::uniform({cols}, 0.5, 1.5, gen),
           beta = Tensor::uniform({cols}, -1, 1, gen);
    Tensor sum = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
    Tensor y = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
    Tensor mask = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
    Tensor dropped = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
    Tensor mean = Tensor::empty({rows}, DType::F32, Device::cpu());
    Tensor rstd = Tensor::empty({rows}, DType::F32, Device::cpu());
    auto fused = [&] {
      be.add_dropout_layer_norm(x.view(), h.view(), gamma.view(), beta.view(), sum.view(), y.view(),
                                mean.view(), rstd.view(), rows, cols, p, 7, 1e-5);
    };
    auto unfused = [&] {
      be.dropout_mask(mask.view(), p, 7);
      be.binary(BinaryOp::Mul, h.view(), mask.view(), dropped.view());
      be.binary(BinaryOp::Add, x.view(), dropped.view(), sum.view());
      be.layer_norm(sum.view(), gamma.view(), beta.view(), y.view(), mean.view(), rstd.view(), rows,
                    cols, 1e-5);
    };
    std::vector<double> a, b;
    for (int r = 0; r < reps; ++r) {
      a.push_back(seconds_of(fused));
      b.push_back(seconds_of(unfused));
    }
    print_pair("residual [1536, 128]", a, b);
  }
  return 0;
}
