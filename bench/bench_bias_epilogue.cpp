// Where a Linear layer's bias is cheapest to add, measured on the shapes of the translator's
// layers (bench/bench_train_step, d = 128, batch 128 of about 9 tokens): (a) the product, then
// the bias_act kernel adding the bias in place in one row pass (what `linear` does), or (b) the
// output pre-filled with the bias broadcast (a copy), then the product with beta = 1 (the bias as
// the gemm's epilogue). The two alternate, call by call, in one process; prints the median time
// per call of each and their ratio. Run it on a quiet machine.
//
//   build/bench_bias_epilogue [--threads N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "backends/backend.h"
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

}  // namespace

int main(int argc, char** argv) {
  int reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      set_num_threads(std::stoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_bias_epilogue [--threads N] [--reps R]\n");
      return 2;
    }
  }
  struct Shape3 {
    int64_t m, k, n;
  };
  // rows = 128 sequences x 9 tokens; the attention projections (d -> d), FFN in (d -> 4d), out.
  const Shape3 shapes[] = {{1152, 128, 128}, {1152, 128, 512}, {1152, 512, 128}};
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
    double ma = median(a) * 1e6, mb = median(b) * 1e6;
    std::printf("%-22s %14.1f %14.1f %8.3f\n", name.c_str(), ma, mb, mb / ma);
  }
  return 0;
}
