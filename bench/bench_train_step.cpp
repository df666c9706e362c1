// One training step, timed, of either model the PyTorch comparison (bench/vs_torch.py) also
// builds: the translator (a G2P-sized pre-LN attention encoder-decoder on fixed synthetic
// batches whose lengths vary like CMUdict words) or the image classifier with any registered
// mixer (Fashion-MNIST-shaped images read from a file the comparison script writes, so both
// sides train on the same bytes). The step is the same in both: label-smoothed cross-entropy
// (0.1), gradient clipping at 1 and AdamW. Prints mixlab's median step and examples per second,
// then one machine-readable `json:` line that also holds the parameter count, the device, the
// median CPU time of the process in a step ("median_cpu_ms", for machines shared with other
// work) and the process's peak resident set size (getrusage; on a GPU also the caching allocator's
// peak bytes in use, "peak_device_bytes").
//
//   build/bench_train_step [--task translate|classify] [--mixer NAME] [--threads N] [--dim D]
//       [--layers L] [--batch B] [--len T] [--patch P] [--images FILE] [--dropout R] [--steps K]
//       [--device cpu|cuda|cuda:N] [--padding auto|skip|keep] [--attention-core fused|math]
//       [--input image|tokens] [--mixer-opt KEY=VALUE]... [--warmup W]
//   build/bench_train_step --list-mixers      # the mixers the speed table covers, one a line
//   build/bench_train_step --kernels          # the CPU kernels' registers: AVX-512, AVX2, generic
//
// --dump-model FILE (classifier): before training, writes the model's initial parameters and
// buffers and its logits on the batch, so that bench/vs_torch.py can load them into its PyTorch
// model and check that it computes the same function. FILE is one JSON line (each tensor's
// name, kind and shape, in order, then the logits' shape) followed by their float32 values.
//
// --padding: whether the translator's blocks run on the real tokens alone (skip, nn/token_rows.h)
// or on the padded [B, N] batch (keep, as nn.Transformer does); auto (the default, the models'
// own) skips on the CPU and keeps on a GPU. The same model either way, for A/B comparisons.
//
// --attention-core: the softmax-attention cores fused (the default) or on the equation's ops,
// each a kernel of its own (nn/attention_core.h; MIXLAB_ATTENTION_CORE does the same). The same
// model either way; docs/speed.md compares the two on the attention classifier.
//
// --input tokens (classifier): the classifier reads token sequences of --len tokens (ℓ = --len)
// instead of images: a ListOps-sized vocabulary of kTokenVocab symbols, token t of example i
// (i·7 + t·3) mod kTokenVocab, label i mod 10 (bench/torch_models.py builds the same batch).
// Every example is full length, so no padding mask is built, as in the image classifier and the
// PyTorch models. bench/scaling.py times it from N = 64 to 4,096 tokens.
// --mixer-opt KEY=VALUE (repeatable): the classifier's mixer options (mixers.md §0), e.g.
// proj-len=64 for a Linformer with a fixed projected length. --warmup W: untimed steps before the
// timed ones (default 3).
//
// --images FILE holds B·28·28 float32 pixels then B int32 labels (little-endian), nothing else;
// without it the classifier trains on an all-zero batch.
//
// The step is the trainer's: the task builds the batch's tensors from the host Batch each step.
// --device cuda: model and optimizer state live on the GPU, the batch is uploaded each step
// (uploads that do not wait: backends/cuda/upload_staging.h; PyTorch's side uploads its batch
// once, so mixlab pays the uploads and PyTorch does not), and each timed step starts and ends
// with the backend's synchronize() (cudaStreamSynchronize on its stream), so a step's time is its
// GPU work's, not the time to queue it. The line and the json also give the host's waits for the
// GPU inside a step (CudaBackend::host_waits, the two synchronisations around each timed step
// left out; under MIXLAB_DEBUG the tracer's wait after every kernel counts too) and the median
// time the host took to queue a step ("queued by the host in", json "host_queue_ms": close to the
// step's time when the step is bound by the host's launches). Without a GPU it
// fails at once with one line (exit 1).
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "backends/cpu/simd/kernel_registers.h"
#include "backends/cpu/openblas_kernels.h"
#include "backends/tracing_backend.h"
#include "core/device.h"
#include "core/parallel.h"
#include "nn/attention_core.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "train/optim/grad_utils.h"
#include "train/optim/optimizer.h"
#include "train/loop/tasks.h"

#ifdef MIXLAB_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

using namespace mixlab;

namespace {

constexpr int64_t kImageSide = 28;  // Fashion-MNIST: 1 channel, 28x28, 10 classes
constexpr int64_t kClasses = 10;
constexpr int64_t kTokenVocab = 16;  // --input tokens: about ListOps' symbol count

struct Options {
  std::string task = "translate", mixer = "attention", images, dump, device = "cpu";
  std::string input = "image";  // the classifier's: image or tokens
  std::map<std::string, std::string> mixer_options;
  int64_t dim = 128, layers = 3, batch = 128, len = 12, patch = 4, steps = 20, warmup = 3;
  double dropout = -1;  // unset: 0.1 for the translator, 0 for the classifier
  std::string padding = "auto";
  std::string attention_core;  // empty: MIXLAB_ATTENTION_CORE's choice, else fused
};

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

// The images and labels bench/vs_torch.py wrote (see the header for the layout).
Batch image_batch(const std::string& path, int64_t batch) {
  Batch b;
  b.size = batch;
  b.feature_shape = {1, kImageSide, kImageSide};
  b.features.assign(batch * kImageSide * kImageSide, 0.0f);
  b.labels.assign(batch, 0);
  if (path.empty()) return b;
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "bench_train_step: cannot open --images ", path);
  in.seekg(0, std::ios::end);
  auto expected = static_cast<std::streamoff>(b.features.size() * 4 + b.labels.size() * 4);
  check(in.tellg() == expected, "bench_train_step: ", path, " holds ",
        static_cast<long long>(in.tellg()), " bytes; --batch ", batch, " needs ",
        static_cast<long long>(expected), " (float32 pixels [B,1,28,28], then int32 labels [B])");
  in.seekg(0);
  in.read(reinterpret_cast<char*>(b.features.data()),
          static_cast<std::streamsize>(b.features.size() * 4));
  in.read(reinterpret_cast<char*>(b.labels.data()),
          static_cast<std::streamsize>(b.labels.size() * 4));
  for (int32_t label : b.labels)
    check(label >= 0 && label < kClasses, "bench_train_step: label ", label, " in ", path,
          " is outside [0, ", kClasses, ")");
  return b;
}

// --input tokens: the fixed token batch described in the header (no lengths: no padding mask).
Batch token_batch(int64_t batch, int64_t len) {
  Batch b;
  b.size = batch;
  b.src_len = len;
  b.src.resize(batch * len);
  b.labels.resize(batch);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t t = 0; t < len; ++t)
      b.src[i * len + t] = static_cast<int32_t>((i * 7 + t * 3) % kTokenVocab);
    b.labels[i] = static_cast<int32_t>(i % kClasses);
  }
  return b;
}

// Every mixer the registry builds, families by the members its tests instantiate.
void list_mixers() {
  for (const MixerInfo& info : MixerRegistry::instance().all())
    for (const std::string& name : info.test_names) std::printf("%s\n", name.c_str());
}

// See --dump-model in the header.
void dump_model(const std::string& path, const Module& model, const Tensor& logits) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::string header = "{\"tensors\": [";
  auto add = [&](const std::vector<std::pair<std::string, Tensor>>& named, const char* kind) {
    for (const auto& [name, t] : named) {
      header += std::string(tensors.empty() ? "" : ", ") + "{\"name\": \"" + name +
                "\", \"kind\": \"" + kind + "\", \"shape\": " + shape_str(t.shape()) + "}";
      tensors.emplace_back(name, t);
    }
  };
  add(model.named_parameters(), "parameter");
  add(model.named_buffers(), "buffer");
  header += "], \"logits_shape\": " + shape_str(logits.shape()) + "}\n";
  tensors.emplace_back("logits", logits);
  std::ofstream out(path, std::ios::binary);
  check(out.good(), "bench_train_step: cannot write --dump-model ", path);
  out << header;
  for (const auto& [name, t] : tensors) {
    std::vector<float> values = t.to(Device::cpu()).to_float_vector();  // from the GPU if there
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
  }
  check(out.good(), "bench_train_step: writing ", path, " failed");
}

#ifdef MIXLAB_HAVE_CUDA
// The CUDA backend itself, not backend_for()'s MIXLAB_DEBUG tracer around it; null on the CPU.
CudaBackend* cuda_of(Device device) {
  return device.is_cuda() ? &dynamic_cast<CudaBackend&>(cuda_backend(device.index)) : nullptr;
}
#endif

// How many times the host has waited for the GPU so far (CudaBackend::host_waits); -1 on the CPU.
long long host_waits([[maybe_unused]] Device device) {
#ifdef MIXLAB_HAVE_CUDA
  if (CudaBackend* cuda = cuda_of(device)) return static_cast<long long>(cuda->host_waits());
#endif
  return -1;
}

// The GPU's caching allocator's peak bytes in use (rounded to its size classes); -1 on the CPU.
long long peak_device_bytes([[maybe_unused]] Device device) {
#ifdef MIXLAB_HAVE_CUDA
  if (CudaBackend* cuda = cuda_of(device))
    return static_cast<long long>(cuda->memory_stats().peak_bytes_in_use);
#endif
  return -1;
}

// The CPU time this process has used so far, all its threads together: on a machine shared with
// other work it counts the step's own work, not its waits for a core (json "median_cpu_ms").
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

int usage_error(const std::string& what) {
  std::fprintf(stderr, "bench_train_step: %s (see the header of bench/bench_train_step.cpp)\n",
               what.c_str());
  return 2;
}

}  // namespace

static int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--list-mixers") {
      list_mixers();
      return 0;
    }
    if (flag == "--kernels") {  // for the speed table's header: the width decides the speed
      std::printf("%s\n", cpu::kernel_registers());
      return 0;
    }
    if (i + 1 >= argc) return usage_error(flag + " needs a value");
    std::string value = argv[++i];
    try {
      if (flag == "--task")
        o.task = value;
      else if (flag == "--mixer")
        o.mixer = value;
      else if (flag == "--images")
        o.images = value;
      else if (flag == "--dump-model")
        o.dump = value;
      else if (flag == "--device")
        o.device = value;
      else if (flag == "--padding")
        o.padding = value;
      else if (flag == "--attention-core")
        o.attention_core = value;
      else if (flag == "--dropout")
        o.dropout = std::stod(value);
      else if (flag == "--threads")
        set_num_threads(std::stoi(value));
      else if (flag == "--dim")
        o.dim = std::stoll(value);
      else if (flag == "--layers")
        o.layers = std::stoll(value);
      else if (flag == "--batch")
        o.batch = std::stoll(value);
      else if (flag == "--len")
        o.len = std::stoll(value);
      else if (flag == "--patch")
        o.patch = std::stoll(value);
      else if (flag == "--steps")
        o.steps = std::stoll(value);
      else if (flag == "--warmup")
        o.warmup = std::stoll(value);
      else if (flag == "--input")
        o.input = value;
      else if (flag == "--mixer-opt") {
        auto eq = value.find('=');
        if (eq == std::string::npos || eq == 0)
          return usage_error("--mixer-opt takes KEY=VALUE, got '" + value + "'");
        o.mixer_options[value.substr(0, eq)] = value.substr(eq + 1);
      } else
        return usage_error("unknown flag " + flag);
    } catch (const std::logic_error&) {
      return usage_error(flag + " takes a number, got '" + value + "'");
    }
  }
  ModelConfig c;
  try {
    c.task = parse_model_task(o.task);
  } catch (const Error& e) {
    return usage_error(std::string("--") + e.what());  // "--task 'x' is not one of: ..."
  }
  if (o.steps < 1) return usage_error("--steps must be at least 1");
  if (o.warmup < 0) return usage_error("--warmup must be at least 0");
  if (o.input != "image" && o.input != "tokens")
    return usage_error("--input takes image or tokens, got '" + o.input + "'");
  if (o.input == "tokens" && (o.len < 1 || o.batch < 1))
    return usage_error("--input tokens needs --len and --batch of at least 1");
  try {
    if (!o.attention_core.empty())
      set_attention_core(parse_attention_core(o.attention_core.c_str(), "--attention-core"));
    attention_core();  // a bad MIXLAB_ATTENTION_CORE fails here, before any work
  } catch (const Error& e) {
    return usage_error(e.what());
  }
  Device device;
  try {
    device = parse_device(o.device);
  } catch (const Error& e) {
    return usage_error(std::string("--device: ") + e.what());
  }
  if (device.is_cuda() && !device_available(DeviceType::CUDA)) {
    std::fprintf(stderr,
                 "bench_train_step: --device %s: no CUDA GPU is available in this build or on "
                 "this machine\n",
                 o.device.c_str());
    return 1;
  }
  if (device.is_cuda()) {
    try {
      backend_for(device);  // cuda:N beyond the GPUs there are: the backend's one-line error
    } catch (const Error& e) {
      std::fprintf(stderr, "bench_train_step: --device %s: %s\n", o.device.c_str(), e.what());
      return 1;
    }
  }

  PaddingRows padding_rows = PaddingRows::Auto;
  if (o.padding == "skip")
    padding_rows = PaddingRows::Skip;
  else if (o.padding == "keep")
    padding_rows = PaddingRows::Keep;
  else if (o.padding != "auto")
    return usage_error("--padding takes auto, skip or keep, got '" + o.padding + "'");

  c.dim = o.dim;
  c.heads = 4;
  c.layers = c.decoder_layers = o.layers;
  c.dropout = o.dropout >= 0 ? o.dropout : (c.task == ModelTask::Translate ? 0.1 : 0.0);
  std::unique_ptr<Module> model;
  std::unique_ptr<TrainTask> task;
  Batch b;
  std::string shape;
  if (c.task == ModelTask::Translate) {
    c.mixer = c.decoder_mixer = c.cross = "attention";
    c.max_len = c.tgt_max_len = o.len;
    c.vocab = 31;
    c.tgt_vocab = 43;
    auto translator = std::make_unique<Translator>(c);
    translator->set_padding_rows(padding_rows);
    translator->train();
    translator->to(device);
    task = std::make_unique<TranslationTask>(*translator, device, 0.1);
    b = synthetic_batch(o.batch, o.len, c.vocab, c.tgt_vocab);
    // Say which path ran: the blocks on the real tokens alone, or on the padded batch.
    shape = "len=" + std::to_string(o.len) +
            (translator->skips_padding(device) ? " padding-skipped" : " padding-kept");
    model = std::move(translator);
  } else {
    c.mixer = o.mixer;
    c.mixer_options = o.mixer_options;
    c.classes = kClasses;
    const bool tokens = o.input == "tokens";
    if (tokens) {
      c.input = InputKind::Tokens;
      c.vocab = kTokenVocab;
      c.max_len = o.len;  // ℓ = the sequence length
    } else {
      if (o.patch < 1 || kImageSide % o.patch != 0)
        return usage_error("--patch must divide 28, got " + std::to_string(o.patch));
      c.input = InputKind::Image;
      c.image_channels = 1;
      c.image_height = c.image_width = kImageSide;
      c.patch = o.patch;
      c.max_len = (kImageSide / o.patch) * (kImageSide / o.patch);  // ℓ = the patch count
    }
    auto classifier = std::make_unique<Classifier>(c);
    classifier->train();
    classifier->to(device);
    task = std::make_unique<ClassificationTask>(*classifier, device, 0.1);
    b = tokens ? token_batch(o.batch, o.len) : image_batch(o.images, o.batch);
    if (!o.dump.empty()) {
      NoGradGuard no_grad;
      Tensor inputs =
          tokens ? Tensor::from_data(b.src, {o.batch, o.len}, device)
                 : Tensor::from_data(b.features, {o.batch, kImageSide * kImageSide}, device);
      dump_model(o.dump, *classifier, classifier->forward(inputs));
    }
    model = std::move(classifier);
    shape = tokens ? "input=tokens len=" + std::to_string(o.len)
                   : "patch=" + std::to_string(o.patch) + " tokens=" + std::to_string(c.max_len);
  }
  AdamW optimizer(param_groups(*model, 0.01), AdamOptions{1e-3});
  std::vector<double> times;
  // On a GPU, how long the host took to queue each step (from the clock's start to the step's
  // last launch, before the closing synchronize): near the step's time, the GPU was waiting for
  // the host's launches; well under it, the GPU's own work set the pace.
  std::vector<double> queue_times;
  std::vector<double> cpu_times;     // the process's CPU time in each timed step
  const int64_t warm_up = o.warmup;  // steps before the timed ones
  // On a GPU the host only queues work: wait for the device before starting and before
  // stopping the clock (the CPU's synchronize() would be a no-op; it is not called there).
  auto wait_for_device = [&] {
    if (device.is_cuda()) backend_for(device).synchronize();
  };
  long long waits_before = 0;
  for (int64_t s = 0; s < o.steps + warm_up; ++s) {
    if (s == warm_up) waits_before = host_waits(device);
    wait_for_device();
    auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_seconds();
    Tensor loss = task->loss(b);
    loss.backward();
    std::vector<Tensor> params = model->parameters();
    clip_grad_norm_tensor(params, 1.0);  // as the trainer: the norm is not read back
    optimizer.step();
    optimizer.zero_grad();
    auto queued = std::chrono::steady_clock::now();
    wait_for_device();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= warm_up) {
      times.push_back(secs);
      cpu_times.push_back(process_cpu_seconds() - cpu0);
      queue_times.push_back(std::chrono::duration<double>(queued - t0).count());
    }
    // MIXLAB_DEBUG's table counts the timed steps only, as the median does: the warm-up's first
    // touches of fresh memory would be charged to whichever kernels write it first.
    if (s == warm_up - 1) reset_kernel_trace();
  }
  // The step's own waits: not the two synchronize() calls around each timed step.
  const double waits_per_step =
      device.is_cuda()
          ? static_cast<double>(host_waits(device) - waits_before - 2 * o.steps) / o.steps
          : 0.0;
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  std::sort(queue_times.begin(), queue_times.end());
  double median_queue = queue_times[queue_times.size() / 2];
  std::sort(cpu_times.begin(), cpu_times.end());
  double median_cpu = cpu_times[cpu_times.size() / 2];
  long long params = model->parameter_count();
  std::string label = c.task == ModelTask::Translate ? "translator" : "classifier " + o.mixer;
  long long device_bytes = peak_device_bytes(device);
  std::string on_device =
      device.is_cuda() ? " on " + device.str() : "";  // the CPU's line stays as it was
  std::string device_peak;
  if (device_bytes >= 0) {
    char text[160];
    std::snprintf(text, sizeof text,
                  ", peak device memory %.1f MiB, %.1f host waits a step, queued by the host in "
                  "%.2f ms",
                  device_bytes / 1048576.0, waits_per_step, median_queue * 1e3);
    device_peak = text;
  }
  std::printf(
      "mixlab %s d=%lld layers=%lld batch=%lld %s dropout=%g threads=%d params=%lld%s: "
      "median step %.2f ms, %.1f examples/s, peak RSS %.1f MiB%s\n",
      label.c_str(), static_cast<long long>(o.dim), static_cast<long long>(o.layers),
      static_cast<long long>(o.batch), shape.c_str(), c.dropout, num_threads(), params,
      on_device.c_str(), median * 1e3, o.batch / median, peak_rss_kib() / 1024.0,
      device_peak.c_str());
  std::string device_json = "\"device\": \"" + device.str() + "\"";
  if (device_bytes >= 0) {
    device_json += ", \"peak_device_bytes\": " + std::to_string(device_bytes);
    device_json += ", \"host_waits_per_step\": " + std::to_string(waits_per_step);
    device_json += ", \"host_queue_ms\": " + std::to_string(median_queue * 1e3);
  }
  std::printf(
      "json: {\"median_ms\": %.6f, \"median_cpu_ms\": %.6f, \"examples_per_s\": %.6f, "
      "\"params\": %lld, \"peak_rss_kib\": %ld, \"threads\": %d, \"attention_core\": \"%s\", "
      "%s}\n",
      median * 1e3, median_cpu * 1e3, o.batch / median, params, peak_rss_kib(), num_threads(),
      attention_core_name(attention_core()), device_json.c_str());
  return 0;
}

int main(int argc, char** argv) {
  reexec_with_better_openblas_kernels(argv);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a failed step or file (a GPU's error, too): one line
    std::string what = e.what();
    if (what.rfind("bench_train_step:", 0) != 0) what = "bench_train_step: " + what;
    std::fprintf(stderr, "%s\n", what.c_str());
    return 1;
  }
}
