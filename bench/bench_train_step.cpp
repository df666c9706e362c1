// One training step of a G2P-sized translator, timed: a pre-LN attention encoder-decoder (GELU
// FFN of width 4d, learned positions, final LayerNorms), label-smoothed cross-entropy, gradient
// clipping and AdamW, on fixed synthetic batches whose lengths vary like CMUdict words.
// bench/vs_torch.py builds the same model in PyTorch, runs it on the same threads and prints
// the ratio; run alone, this prints mixlab's time per step and examples per second.
//
//   build/bench_train_step [--threads N] [--dim D] [--layers L] [--batch B] [--len T] [--steps K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/openblas_kernels.h"
#include "core/parallel.h"
#include "nn/models.h"
#include "train/grad_utils.h"
#include "train/optimizer.h"
#include "train/tasks.h"

using namespace mixlab;

namespace {

// Both sides of example i are `len - i % (len / 2)` tokens long (<bos>/<eos> included on the
// target), tokens drawn by a fixed formula: the PyTorch side builds the identical batch.
Batch synthetic_batch(int64_t batch, int64_t len, int64_t src_vocab, int64_t tgt_vocab) {
  Batch b;
  b.size = batch;
  b.src_len = len;
  b.tgt_len = len;
  b.src.assign(batch * len, 0);
  b.tgt.assign(batch * len, 0);
  for (int64_t i = 0; i < batch; ++i) {
    int32_t n = static_cast<int32_t>(len - i % (len / 2));
    b.src_lengths.push_back(n);
    b.tgt_lengths.push_back(n);
    for (int32_t t = 0; t < n; ++t) {
      b.src[i * len + t] = static_cast<int32_t>(3 + (i * 7 + t * 3) % (src_vocab - 3));
      b.tgt[i * len + t] = static_cast<int32_t>(3 + (i * 5 + t * 11) % (tgt_vocab - 3));
    }
    b.tgt[i * len] = 1;          // <bos>
    b.tgt[i * len + n - 1] = 2;  // <eos>
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_better_openblas_kernels(argv);
  int64_t dim = 128, layers = 3, batch = 128, len = 12, steps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int64_t v = std::stoll(argv[i + 1]);
    if (flag == "--threads")
      set_num_threads(static_cast<int>(v));
    else if (flag == "--dim")
      dim = v;
    else if (flag == "--layers")
      layers = v;
    else if (flag == "--batch")
      batch = v;
    else if (flag == "--len")
      len = v;
    else if (flag == "--steps")
      steps = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  ModelConfig c;
  c.task = "translate";
  c.mixer = c.decoder_mixer = c.cross = "attention";
  c.dim = dim;
  c.heads = 4;
  c.layers = c.decoder_layers = layers;
  c.max_len = c.tgt_max_len = len;
  c.vocab = 31;
  c.tgt_vocab = 43;
  c.dropout = 0.1;
  Translator model(c);
  model.train();
  TranslationTask task(model, Device::cpu(), 0.1);
  AdamW optimizer(param_groups(model, 0.01), AdamOptions{1e-3});
  Batch b = synthetic_batch(batch, len, c.vocab, c.tgt_vocab);
  std::vector<double> times;
  for (int64_t s = 0; s < steps + 3; ++s) {  // 3 warm-up steps
    auto t0 = std::chrono::steady_clock::now();
    Tensor loss = task.loss(b);
    loss.backward();
    std::vector<Tensor> params = model.parameters();
    clip_grad_norm(params, 1.0);
    optimizer.step();
    optimizer.zero_grad();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= 3) times.push_back(secs);
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  std::printf(
      "mixlab d=%lld layers=%lld batch=%lld len=%lld threads=%d params=%lld: "
      "median step %.2f ms, %.1f examples/s\n",
      static_cast<long long>(dim), static_cast<long long>(layers), static_cast<long long>(batch),
      static_cast<long long>(len), num_threads(), static_cast<long long>(model.parameter_count()),
      median * 1e3, batch / median);
  return 0;
}
