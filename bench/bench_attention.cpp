// The attention core, fused (fused_attention: one kernel per direction, (b, h) items over the
// pool) against the unfused path it replaced (matmul, scale, masked_softmax, matmul), forward
// and backward, on the shapes of the speed table's models, in one process. The two alternate,
// run after run, and each keeps its fastest run, so a loaded machine slows both alike; prints
// each in ms and the ratio unfused / fused (above 1: fused is faster).
//
//   build/bench_attention [--threads N] [--seconds S] [--forward 1]   (1: forward only)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "backends/cpu/openblas_kernels.h"
#include "core/parallel.h"
#include "core/random.h"
#include "nn/mixers/common.h"

using namespace mixlab;

namespace {

struct Shape4 {
  const char* what;
  int64_t b, h, n, d;
  bool padded_causal;  // the translator's decoder self-attention mask, else none (classifier)
};

bool forward_only = false;

double seconds_of(bool fused, const Tensor& x_q, const Tensor& x_k, const Tensor& x_v,
                  const Tensor& mask, const Tensor& w) {
  std::optional<NoGradGuard> no_grad;
  if (forward_only) no_grad.emplace();
  const int64_t heads = 4;
  double scale = 1.0 / std::sqrt(static_cast<double>(x_q.size(2) / heads));
  auto t0 = std::chrono::steady_clock::now();
  Tensor q = mixers::split_heads(x_q, heads), k = mixers::split_heads(x_k, heads);
  Tensor v = mixers::split_heads(x_v, heads);
  Tensor heads_out =
      fused ? fused_attention(q, k, v, mask, scale)
            : matmul(mixers::masked_softmax(mul(matmul(q, transpose(k, -1, -2)), scale), mask), v);
  Tensor out = mixers::merge_heads(heads_out);
  if (!forward_only) sum(mul(out, w)).backward();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_better_openblas_kernels(argv);  // OpenBLAS's AVX-512 kernels on newer Xeons
  int threads = 1;
  double budget = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds")) budget = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--forward")) forward_only = std::atoi(argv[i + 1]) != 0;
  }
  set_num_threads(threads);
  std::printf("attention core, forward + backward, float32, %d thread(s), best of runs\n", threads);
  std::printf("%-44s %10s %10s %8s\n", "shape", "unfused", "fused", "ratio");
  for (Shape4 s :
       {Shape4{"translator d=128: B=128 h=4 N=12 d_h=32, causal+pad", 128, 4, 12, 32, true},
        Shape4{"classifier d=128: B=128 h=4 N=49 d_h=32", 128, 4, 49, 32, false}}) {
    Generator gen(5);
    // As the mixers call it: heads split out of [B, N, h·d_h] projections, merged after.
    auto leaf = [&](int64_t n) {
      Tensor t = Tensor::uniform({s.b, n, s.h * s.d}, -1, 1, gen);
      t.set_requires_grad(true);
      return t;
    };
    Tensor q = leaf(s.n), k = leaf(s.n), v = leaf(s.n);
    Tensor w = Tensor::uniform({s.b, s.n, s.h * s.d}, -1, 1, gen);
    Tensor mask;
    if (s.padded_causal) {
      std::vector<int32_t> lengths;
      for (int64_t i = 0; i < s.b; ++i)
        lengths.push_back(static_cast<int32_t>(s.n - i % (s.n / 2)));
      mask = mixers::attention_mask(length_mask(lengths, s.n), true, s.n, s.n, DType::F32,
                                    Device::cpu());
    }
    double best[2] = {1e30, 1e30}, spent = 0;
    for (int run = 0; spent < budget || run < 10; ++run) {
      for (int fused = 0; fused < 2; ++fused) {
        double t = seconds_of(fused == 1, q, k, v, mask, w);
        if (run > 0) best[fused] = std::min(best[fused], t);  // run 0 warms up
        spent += t;
      }
    }
    std::printf("%-44s %8.3f ms %7.3f ms %7.2fx\n", s.what, best[0] * 1e3, best[1] * 1e3,
                best[0] / best[1]);
  }
}
