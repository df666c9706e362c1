// The engine's matmul against a direct cblas_sgemm on the same buffers, in the same process,
// on the same threads. Prints time per call of each and the ratio raw/engine (1.0 = no
// overhead; the issue asks for >= 0.9 at 512 and 1024). The raw call uses OpenBLAS's own threads,
// the engine splits products over its pool with OpenBLAS on one thread. A second table repeats
// it with every 16th row of A subnormal: raw OpenBLAS computes on them in microcode, the engine
// flushes them to zero (core/float_env.h).
//
//   build/bench_matmul [--threads N]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/parallel.h"
#include "core/random.h"

using namespace mixlab;

namespace {

template <typename F>
double best_seconds(F&& fn, double budget) {
  fn();  // warm-up: first-touch pages, OpenBLAS thread start
  double best = 1e30, spent = 0;
  int runs = 0;
  while ((spent < budget || runs < 5) && runs < 1000) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    spent += s;
    ++runs;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--threads") == 0) set_num_threads(std::stoi(argv[i + 1]));
  NoGradGuard no_grad;
  std::printf("matmul, float32, %d thread(s): engine vs raw cblas_sgemm on the same buffers\n",
              num_threads());
  std::printf("(raw: OpenBLAS's own threads; engine: OpenBLAS on one thread, split by the pool)\n");
  for (bool subnormal_rows : {false, true}) {
    if (subnormal_rows)
      std::printf("\nevery 16th row of A subnormal (1e-41), as softmax outputs often are:\n");
    std::printf("%6s %12s %12s %8s\n", "n", "raw (us)", "engine (us)", "ratio");
    for (int64_t n : {64, 128, 256, 512, 1024}) {
      Generator gen(1);
      Tensor a = Tensor::uniform({n, n}, -1, 1, gen), b = Tensor::uniform({n, n}, -1, 1, gen);
      if (subnormal_rows)
        for (int64_t r = 0; r < n; r += 16) std::fill_n(a.data<float>() + r * n, n, 1e-41f);
      Tensor c = Tensor::empty({n, n});
      double budget = 0.5;
      openblas_set_num_threads(num_threads());
      double raw = best_seconds(
          [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(),
                        n, b.data<float>(), n, 0.0f, c.data<float>(), n);
          },
          budget);
      openblas_set_num_threads(1);  // the engine's setting (core/parallel.cpp)
      double engine = best_seconds([&] { Tensor out = matmul(a, b); }, budget);
      std::printf("%6lld %12.1f %12.1f %8.3f\n", static_cast<long long>(n), raw * 1e6, engine * 1e6,
                  raw / engine);
    }
  }
  return 0;
}
