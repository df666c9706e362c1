// The CUDA backend's own promises, beyond what each kernel computes (that is the op harness's:
// tests/op_cases.cpp runs every kernel on every backend against the reference backend in
// float64): host-device copies, ordering on the stream, the caching allocator, errors, gradients
// across devices, and a small model trained a few steps on both devices.
//
// Every GPU test case carries doctest::skip(no GPU): on a machine without one they are reported
// as skipped. A few host-side checks (the allocator's size classes, the error for a missing
// device) run everywhere.
//
// Run only these: mixlab_tests -tc='cuda:*'
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/random.h"
#include "nn/conv_tokenizer.h"
#include "nn/layers.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "tests/op_harness.h"

#ifdef MIXLAB_HAVE_CUDA
#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/upload_staging.h"
#endif

using namespace mixlab;

namespace {

const bool kNoGpu = !device_available(DeviceType::CUDA);

Device gpu() { return Device::cuda(0); }

Tensor rnd(const Shape& shape, uint64_t seed, DType dtype = DType::F32, double lo = -1.0,
           double hi = 1.0) {
  Generator gen(seed);
  return Tensor::uniform(shape, lo, hi, gen, dtype);
}

// Small integers (-1, 0, 1, 2) so that comparisons and ties happen.
Tensor rnd_ints(const Shape& shape, uint64_t seed, DType dtype = DType::F32) {
  Generator gen(seed);
  std::vector<double> v(numel_of(shape));
  for (double& x : v) x = static_cast<double>(gen.below(4)) - 1.0;
  Tensor t = Tensor::from_data(v, shape);
  return dtype == DType::F64 ? t : t.to(dtype);
}

// A leaf on `device` holding host's values.
[[maybe_unused]] Tensor leaf(const Tensor& host, Device device) {  // used by the CUDA-only cases
  Tensor t = host.to(device).detach();
  t.set_requires_grad(true);
  return t;
}

using test::Tol;
Tol tol_for(DType dtype) { return dtype == DType::F64 ? Tol{1e-10, 1e-12} : Tol{1e-5, 1e-6}; }
const Tol kExact{0, 0};

// |cuda - cpu| <= atol + rtol |cpu| elementwise (the op harness's comparison, tests/op_harness.h).
void expect_close(const Tensor& ref, const Tensor& got, Tol tol, const std::string& what) {
  REQUIRE(ref.defined());
  REQUIRE(got.defined());
  REQUIRE(shape_str(ref.shape()) == shape_str(got.shape()));
  CHECK(ref.dtype() == got.dtype());
  test::expect_close(ref.to_double_vector(), got.to_double_vector(), tol, what);
}

Backend& kernels(Device d) { return backend_for(d); }

const DType kFloats[] = {DType::F32, DType::F64};

}  // namespace

// ---- host-side checks (run with or without a GPU) ---------------------------------------------

TEST_CASE("cuda: asking for a missing CUDA device is an Error") {
  if (!device_available(DeviceType::CUDA)) {
    CHECK_THROWS_AS(backend_for(Device::cuda()), Error);
    CHECK_THROWS_AS(Tensor::zeros({2}, DType::F32, Device::cuda()), Error);
    CHECK_THROWS_AS(Tensor::ones({2}).to(Device::cuda()), Error);
  } else {
    CHECK_THROWS_AS(backend_for(Device::cuda(1 << 20)), Error);
  }
}

#ifdef MIXLAB_HAVE_CUDA
TEST_CASE("cuda: allocator size classes waste at most a quarter") {
  CHECK(CachingAllocator::size_class(1) == 512);
  CHECK(CachingAllocator::size_class(512) == 512);
  CHECK(CachingAllocator::size_class(513) == 640);
  CHECK(CachingAllocator::size_class(1024) == 1024);
  CHECK(CachingAllocator::size_class(1025) == 1280);
  size_t previous = 0;
  for (size_t bytes = 1; bytes < (size_t(1) << 34); bytes = bytes * 3 / 2 + 1) {
    size_t c = CachingAllocator::size_class(bytes);
    CHECK(c >= bytes);
    CHECK(c % 128 == 0);
    CHECK(c >= previous);
    if (bytes > 512) CHECK(static_cast<double>(c) <= 1.25 * static_cast<double>(bytes) + 1);
    previous = c;
  }
}
#endif

// ---- memory and data movement -----------------------------------------------------------------

TEST_CASE("cuda: host-device copies round-trip every dtype" * doctest::skip(kNoGpu)) {
  for (int64_t n : {0, 1, 17, 1000, 100003}) {
    Tensor f = rnd({n}, 1, DType::F32);
    Tensor d = rnd({n}, 2, DType::F64);
    Tensor i = rnd_ints({n}, 3).to(DType::I32);
    for (const Tensor& t : {f, d, i}) {
      Tensor g = t.to(gpu());
      CHECK(g.device() == gpu());
      expect_close(t, g, kExact, "round trip " + std::string(dtype_name(t.dtype())));
      expect_close(t, g.to(Device::cpu()), kExact, "back on the host");
    }
  }
}

TEST_CASE("cuda: copies back to the host wait for queued kernels" * doctest::skip(kNoGpu)) {
  NoGradGuard no_grad;
  Tensor c = rnd({1 << 20}, 5);
  Tensor g = c.to(gpu());
  for (int i = 0; i < 50; ++i) {
    c = add(mul(c, 1.0001), 0.001);
    g = add(mul(g, 1.0001), 0.001);
  }
  expect_close(c, g, Tol{1e-5, 1e-6}, "chain of 100 kernels");
  CHECK(sum(g).item() == doctest::Approx(sum(c).item()).epsilon(1e-4));
}

#ifdef MIXLAB_HAVE_CUDA
// Uploads through the page-locked ring (backends/cuda/upload_staging.h): they return while the
// GPU is still busy, the host buffer can be overwritten at once, and wrapping around the ring
// (waiting for the GPU to release old uploads) loses nothing.
TEST_CASE("cuda: small uploads do not wait for the GPU, and the host may reuse its buffer" *
          doctest::skip(kNoGpu)) {
  NoGradGuard no_grad;
  auto& backend = dynamic_cast<CudaBackend&>(backend_for(gpu()));
  {  // First uses that may wait (the ring's cudaHostAlloc, the allocator's cudaMalloc), now.
    std::vector<Tensor> warm;
    for (int k = 0; k < 8; ++k)
      warm.push_back(Tensor::from_data(std::vector<float>(1000), {1000}, gpu()));
    backend.synchronize();
  }
  // Keep the GPU busy: 400 passes over 64 MiB take milliseconds even on a large GPU, longer
  // than queueing them does.
  Tensor busy = Tensor::zeros({16 << 20}, DType::F32, gpu());
  for (int i = 0; i < 400; ++i) busy = add(busy, 1.0);
  std::vector<float> host(1000);
  std::vector<Tensor> sent;
  const int64_t waits_before = backend.host_waits();
  for (int k = 0; k < 8; ++k) {
    for (size_t j = 0; j < host.size(); ++j) host[j] = static_cast<float>(k * 10000 + j);
    sent.push_back(Tensor::from_data(host, {1000}, gpu()));  // host[] is overwritten next round
  }
  // Had an upload waited for the stream, the 400 passes would be finished by now.
  CHECK(cudaStreamQuery(backend.stream()) == cudaErrorNotReady);
  cudaGetLastError();  // "not ready" must not be blamed on the next launch
  CHECK(backend.host_waits() == waits_before);
  for (int k = 0; k < 8; ++k) {
    std::vector<float> back = sent[k].to_float_vector();
    REQUIRE(back.size() == 1000);
    CHECK(back[0] == static_cast<float>(k * 10000));
    CHECK(back[999] == static_cast<float>(k * 10000 + 999));
  }
  CHECK(busy.to_float_vector()[12345] == 400.0f);
  // A large upload takes the waiting path and arrives whole.
  std::vector<float> big(3 << 20);
  for (size_t j = 0; j < big.size(); ++j) big[j] = static_cast<float>(j % 9973);
  std::vector<float> big_back =
      Tensor::from_data(big, {static_cast<int64_t>(big.size())}, gpu()).to_float_vector();
  CHECK(big_back == big);
}

TEST_CASE("cuda: the upload ring wraps around many times without losing an upload" *
          doctest::skip(kNoGpu)) {
  auto& backend = dynamic_cast<CudaBackend&>(backend_for(gpu()));
  backend.activate();
  // A 64 KiB ring (16 KiB the largest staged upload): 300 uploads of 1-16 KiB wrap it often.
  UploadStaging ring(backend.stream(), 64 << 10);
  CHECK(ring.max_staged_bytes() == 16 << 10);
  const int kUploads = 300;
  const size_t kMaxInts = (16 << 10) / sizeof(int32_t);
  void* device = backend.allocate(kUploads * kMaxInts * sizeof(int32_t));
  std::vector<int32_t> host(kMaxInts);
  std::vector<size_t> counts;
  for (int k = 0; k < kUploads; ++k) {
    size_t n = 1 + (static_cast<size_t>(k) * 977) % kMaxInts;
    for (size_t j = 0; j < n; ++j) host[j] = k * 100000 + static_cast<int32_t>(j);
    REQUIRE(ring.upload(static_cast<int32_t*>(device) + k * kMaxInts, host.data(),
                        n * sizeof(int32_t)));
    counts.push_back(n);
  }
  CHECK_FALSE(ring.upload(device, host.data(), (16 << 10) + 4));  // too large: not staged
  std::vector<int32_t> back(kUploads * kMaxInts);
  backend.copy_to_host(back.data(), device, back.size() * sizeof(int32_t));
  int wrong = 0;
  for (int k = 0; k < kUploads; ++k)
    for (size_t j = 0; j < counts[k]; ++j)
      wrong += back[k * kMaxInts + j] != k * 100000 + static_cast<int32_t>(j);
  CHECK(wrong == 0);
  MESSAGE("host waits for ring space: ", ring.waits());
  backend.synchronize();
  backend.deallocate(device, kUploads * kMaxInts * sizeof(int32_t));
}
#endif

#ifdef MIXLAB_HAVE_CUDA
// Index checks on the GPU (backends/cuda/device_checks.h): an embedding and a cross-entropy with
// good indices make no wait; a bad index is reported at the next wait, with the op's own words,
// and the device stays usable.
TEST_CASE("cuda: index checks make no wait and report a bad index at the next one" *
          doctest::skip(kNoGpu)) {
  auto& backend = dynamic_cast<CudaBackend&>(backend_for(gpu()));
  Tensor table = leaf(rnd({37, 32}, 90), gpu());
  Tensor head = leaf(rnd({32, 10}, 91), gpu());
  Tensor ids = Tensor::from_data(std::vector<int32_t>{3, 36, 0, 7}, {4}, gpu());
  Tensor targets = Tensor::from_data(std::vector<int32_t>{1, -100, 9, 0}, {4}, gpu());
  backend.synchronize();
  const int64_t before = backend.host_waits();
  Tensor loss = cross_entropy(matmul(embedding(table, ids), head), targets, -100, 0.1);
  loss.backward();
  CHECK(backend.host_waits() == before);  // forward and backward queued, nothing waited for
  // The same numbers as on the CPU (the mean over the 3 counted rows).
  Tensor cpu_table = leaf(rnd({37, 32}, 90), Device::cpu());
  Tensor cpu_head = leaf(rnd({32, 10}, 91), Device::cpu());
  Tensor cpu_loss = cross_entropy(
      matmul(embedding(cpu_table, Tensor::from_data(std::vector<int32_t>{3, 36, 0, 7}, {4})),
             cpu_head),
      Tensor::from_data(std::vector<int32_t>{1, -100, 9, 0}, {4}), -100, 0.1);
  cpu_loss.backward();
  CHECK(loss.item() == doctest::Approx(cpu_loss.item()).epsilon(1e-5));
  expect_close(cpu_table.grad(), table.grad().to(Device::cpu()), Tol{1e-5, 1e-6}, "dtable");

  NoGradGuard no_grad;
  Tensor bad_ids = Tensor::from_data(std::vector<int32_t>{3, 40}, {2}, gpu());
  Tensor rows = embedding(table, bad_ids);  // queued: no wait, no throw here
  CHECK_THROWS_WITH_AS(rows.to_float_vector(),
                       doctest::Contains("embedding: index 40 is out of range for a table of "
                                         "shape [37,32] (found on cuda:0"),
                       Error);
  Tensor bad_targets = Tensor::from_data(std::vector<int32_t>{1, 12}, {2}, gpu());
  Tensor bad_loss = cross_entropy(rnd({2, 10}, 92).to(gpu()), bad_targets);
  CHECK_THROWS_WITH_AS(backend.synchronize(),
                       doctest::Contains("cross_entropy: target 12 is out of range for 10 classes"),
                       Error);
  // Reported once, and the device goes on.
  CHECK_NOTHROW(backend.synchronize());
  std::vector<float> good = embedding(table, ids).to_float_vector();
  CHECK(good.size() == 4 * 32);
}
#endif

// ---- a small model on both devices ------------------------------------------------------------

namespace {

class TinyModel : public Module {
 public:
  static constexpr int64_t kVocab = 37, kDim = 32;
  explicit TinyModel(uint64_t seed) {
    Generator gen(seed);
    emb = register_module("emb", std::make_shared<Embedding>(kVocab, kDim, gen));
    MixerConfig c;
    c.name = "attention";
    c.dim = kDim;
    c.heads = 4;
    c.max_len = 16;
    c.seed = seed;
    mixer = register_module("mixer", make_mixer(c));
    norm1 = register_module("norm1", std::make_shared<LayerNorm>(kDim));
    norm2 = register_module("norm2", std::make_shared<LayerNorm>(kDim));
    ffn = register_module("ffn", std::make_shared<FeedForward>(kDim, 2 * kDim, gen));
    head = register_module("head", std::make_shared<Linear>(kDim, kVocab, true, gen));
  }
  std::string type_name() const override { return "TinyModel"; }

  Tensor loss(const Tensor& ids, const Tensor& targets, const MixerContext& ctx,
              uint64_t dropout_seed) {
    Tensor x = emb->forward(ids);
    x = add(x, mixer->forward(norm1->forward(x), ctx));
    x = add(x, dropout(ffn->forward(norm2->forward(x)), 0.1, true, dropout_seed));
    return cross_entropy(head->forward(x), targets, -100, 0.1);
  }

  std::shared_ptr<Embedding> emb;
  std::shared_ptr<Mixer> mixer;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<Linear> head;
};

}  // namespace

TEST_CASE("cuda: a small model trains the same on both devices" * doctest::skip(kNoGpu)) {
  const int64_t batch = 3, len = 12;
  std::vector<int32_t> lengths{12, 7, 10};
  Generator gen(230);
  std::vector<int32_t> ids(batch * len), targets(batch * len);
  for (int64_t i = 0; i < batch * len; ++i) {
    ids[i] = static_cast<int32_t>(gen.below(TinyModel::kVocab));
    targets[i] =
        (i % len) >= lengths[i / len] ? -100 : static_cast<int32_t>(gen.below(TinyModel::kVocab));
  }
  for (DType dt : kFloats) {
    Tol tol = dt == DType::F64 ? Tol{1e-8, 1e-10} : Tol{2e-3, 2e-5};
    TinyModel cpu_model(7), gpu_model(7);
    cpu_model.to(dt);
    gpu_model.to(dt);
    gpu_model.to(gpu());
    auto cpu_params = cpu_model.named_parameters(), gpu_params = gpu_model.named_parameters();
    REQUIRE(cpu_params.size() == gpu_params.size());
    // SGD with momentum: linear in the gradients. (Adam would blow float noise in gradients
    // that are zero in exact arithmetic, like the key bias's, up to lr-sized updates.)
    std::vector<Tensor> cpu_buf, gpu_buf;
    for (const auto& [name, p] : cpu_params) {
      cpu_buf.push_back(Tensor::zeros(p.shape(), dt));
      gpu_buf.push_back(Tensor::zeros(p.shape(), dt, gpu()));
    }
    for (int step = 1; step <= 3; ++step) {
      auto run = [&](TinyModel& model, Device dev,
                     std::vector<std::pair<std::string, Tensor>>& params,
                     std::vector<Tensor>& buf) {
        MixerContext ctx;
        ctx.lengths = lengths;
        ctx.valid = length_mask(lengths, len, dt, dev);
        model.zero_grad();
        Tensor loss = model.loss(Tensor::from_data(ids, {batch, len}, dev),
                                 Tensor::from_data(targets, {batch, len}, dev), ctx, 500 + step);
        loss.backward();
        std::vector<Tensor> grads;
        for (size_t i = 0; i < params.size(); ++i) {
          Tensor p = params[i].second;
          Tensor g = p.grad();
          REQUIRE(g.defined());
          grads.push_back(g.clone());
          SgdArgs a{};
          a.lr = 0.1, a.momentum = 0.9, a.dampening = 0.0, a.weight_decay = 1e-4;
          a.nesterov = true;
          a.first_step = step == 1;
          kernels(dev).sgd_update(p.view(), g.view(), buf[i].view(), a);
        }
        return std::make_pair(loss, grads);
      };
      auto [cpu_loss, cpu_grads] = run(cpu_model, Device::cpu(), cpu_params, cpu_buf);
      auto [gpu_loss, gpu_grads] = run(gpu_model, gpu(), gpu_params, gpu_buf);
      std::string tag = std::string(dtype_name(dt)) + " step " + std::to_string(step);
      expect_close(cpu_loss, gpu_loss, tol, "loss " + tag);
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        expect_close(cpu_grads[i], gpu_grads[i], tol, "grad of " + cpu_params[i].first + " " + tag);
        expect_close(cpu_params[i].second, gpu_params[i].second, tol,
                     "updated " + cpu_params[i].first + " " + tag);
      }
    }
  }
}

TEST_CASE("cuda: a translator on the real tokens alone gives the CPU's loss and gradients" *
          doctest::skip(kNoGpu)) {
  // nn/token_rows.h on the GPU: take_rows both ways, attention's and gMLP's forward_rows, and
  // the padded path of the same model on the GPU as a second reference.
  std::vector<int32_t> src_len{9, 4, 1}, tgt_len{6, 9, 3};
  std::vector<int32_t> src(3 * 9), tgt(3 * 9), out(3 * 9);
  for (int64_t i = 0; i < 27; ++i) {
    bool src_real = i % 9 < src_len[i / 9], tgt_real = i % 9 < tgt_len[i / 9];
    src[i] = src_real ? static_cast<int32_t>(1 + (i * 7) % 10) : 0;
    tgt[i] = tgt_real ? static_cast<int32_t>(1 + (i * 5) % 8) : 0;
    out[i] = tgt_real ? static_cast<int32_t>(1 + (i * 3) % 8) : 0;
  }
  for (const char* decoder : {"attention", "gmlp"}) {
    for (DType dt : kFloats) {
      ModelConfig c;
      c.task = ModelTask::Translate;
      c.mixer = "attention";
      c.decoder_mixer = decoder;
      c.dim = 16;
      c.heads = 2;
      c.layers = c.decoder_layers = 2;
      c.max_len = c.tgt_max_len = 9;
      c.vocab = 11;
      c.tgt_vocab = 9;
      c.dropout = 0.0;
      Tol tol = dt == DType::F64 ? Tol{1e-9, 1e-11} : Tol{2e-4, 2e-6};
      auto run = [&](Device dev, PaddingRows mode) {
        Translator m(c);
        m.to(dt);
        m.to(dev);
        m.set_padding_rows(mode);
        CHECK(m.skips_padding(dev) == (mode == PaddingRows::Skip));
        Tensor logits = m.forward(Tensor::from_data(src, {3, 9}, dev), src_len,
                                  Tensor::from_data(tgt, {3, 9}, dev), tgt_len);
        Tensor loss = cross_entropy(logits, Tensor::from_data(out, {3, 9}, dev), 0, 0.1);
        loss.backward();
        std::vector<Tensor> grads{loss};
        for (const auto& named : m.named_parameters()) grads.push_back(named.second.grad());
        return grads;
      };
      std::vector<Tensor> cpu = run(Device::cpu(), PaddingRows::Skip);
      std::vector<Tensor> rows = run(gpu(), PaddingRows::Skip);
      std::vector<Tensor> padded = run(gpu(), PaddingRows::Keep);
      std::string tag = std::string(decoder) + " " + dtype_name(dt);
      for (size_t i = 0; i < cpu.size(); ++i) {
        expect_close(cpu[i], rows[i], tol,
                     "rows on the GPU, tensor " + std::to_string(i) + " " + tag);
        expect_close(padded[i], rows[i], tol,
                     "padded GPU, tensor " + std::to_string(i) + " " + tag);
      }
    }
  }
}

// ---- the CUDA backend's own promises ----------------------------------------------------------

#ifdef MIXLAB_HAVE_CUDA
TEST_CASE("cuda: the caching allocator serves repeated steps without cudaMalloc" *
          doctest::skip(kNoGpu)) {
  auto& backend = dynamic_cast<CudaBackend&>(backend_for(gpu()));
  auto step = [&] {
    Tensor x = leaf(rnd({64, 256}, 240), gpu());
    Tensor y = softmax(matmul(x, transpose(x, 0, 1)));
    Tensor loss = sum(mul(y, y));
    loss.backward();
    return loss.item();
  };
  double first = step();
  step();  // warm-up: the cache settles within a step or two
  step();
  CudaMemoryStats before = backend.memory_stats();
  for (int i = 0; i < 5; ++i) CHECK(step() == first);
  CudaMemoryStats after = backend.memory_stats();
  CHECK(after.device_mallocs == before.device_mallocs);
  CHECK(after.cache_hits > before.cache_hits);
  CHECK(after.bytes_cached > 0);
  backend.empty_cache();
  CHECK(backend.memory_stats().bytes_cached == 0);
  CHECK(step() == first);  // still works after giving the memory back
}

TEST_CASE("cuda: failures are mixlab::Error and leave the device usable" * doctest::skip(kNoGpu)) {
  // 32 TiB: cudaMalloc fails, the allocator empties its cache, retries, and reports.
  CHECK_THROWS_AS(Tensor::empty({int64_t(1) << 43}, DType::F32, gpu()), Error);
  Tensor ok = Tensor::ones({3}, DType::F32, gpu());
  CHECK(sum(ok).item() == 3.0);
  // Devices never mix silently.
  CHECK_THROWS_AS(add(Tensor::ones({3}), ok), Error);
  // An integer tensor is not a float kernel's input.
  View v = Tensor::zeros({4}, DType::I32, gpu()).view();
  CHECK_THROWS_AS(backend_for(gpu()).unary(UnaryOp::Exp, v, v, 0.0), Error);
}
#endif

TEST_CASE("cuda: the convolutional tokenizer gives the CPU's tokens and gradients" *
          doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    Generator gen_cpu(260), gen_gpu(260);
    ConvTokenizer cpu_tok(1, 8, 8, 4, 6, gen_cpu), gpu_tok(1, 8, 8, 4, 6, gen_gpu);
    cpu_tok.to(dt);
    gpu_tok.to(dt);
    gpu_tok.to(gpu());
    Tensor images = rnd({3, 64}, 261, dt);
    Tensor cpu_out = cpu_tok.forward(images), gpu_out = gpu_tok.forward(images.to(gpu()));
    expect_close(cpu_out, gpu_out.to(Device::cpu()), tol_for(dt), "tokens");
    Tensor weights = rnd(cpu_out.shape(), 262, dt);
    sum(mul(cpu_out, weights)).backward();
    sum(mul(gpu_out, weights.to(gpu()))).backward();
    auto cpu_params = cpu_tok.named_parameters(), gpu_params = gpu_tok.named_parameters();
    REQUIRE(cpu_params.size() == gpu_params.size());
    for (size_t i = 0; i < cpu_params.size(); ++i)
      expect_close(cpu_params[i].second.grad(), gpu_params[i].second.grad().to(Device::cpu()),
                   tol_for(dt), "grad of " + cpu_params[i].first);
  }
}

TEST_CASE("cuda: gradients flow back across Tensor.to" * doctest::skip(kNoGpu)) {
  for (DType dt : kFloats) {
    Tensor x = rnd({17, 5}, 250, dt);
    x.set_requires_grad(true);
    Tensor y = tanh(x.to(gpu()));              // on the GPU
    Tensor z = mul(y.to(Device::cpu()), 2.0);  // back on the host
    sum(z).backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().device() == Device::cpu());
    Tensor x2 = rnd({17, 5}, 250, dt);
    x2.set_requires_grad(true);
    sum(mul(tanh(x2), 2.0)).backward();
    expect_close(x2.grad(), x.grad(), tol_for(dt), "grad through to()");
  }
}

// A diverging run's scores (about 1e11): the backward's recomputed probabilities must use the
// scores the forward's log-sum-exp came from, rounded alike (nvcc fuses a plain product into the
// subtraction that follows), or exp overflows to inf. The weights are one-hot, so out and dv
// agree with the CPU's; dq and dk are 0 up to rounding, and must be finite.
TEST_CASE("cuda: the attention core at scores of 1e11 matches the CPU's, with finite gradients" *
          doctest::skip(kNoGpu)) {
  for (int64_t n : {12, 49}) {
    INFO(n << " tokens");
    Tensor q = rnd({1, 2, n, 8}, 260, DType::F32, -2e5, 2e5);
    Tensor k = rnd({1, 2, n, 8}, 261, DType::F32, -2e5, 2e5);
    Tensor v = rnd({1, 2, n, 8}, 262), w = rnd({1, 2, n, 8}, 263);
    std::vector<Tensor> out, dv, dq, dk;
    for (Device device : {Device::cpu(), gpu()}) {
      Tensor qd = leaf(q, device), kd = leaf(k, device), vd = leaf(v, device);
      Tensor o = fused_attention(qd, kd, vd, Tensor(), 1.0 / std::sqrt(8.0));
      sum(mul(o, w.to(device))).backward();
      out.push_back(o.to(Device::cpu()));
      dv.push_back(vd.grad().to(Device::cpu()));
      dq.push_back(qd.grad().to(Device::cpu()));
      dk.push_back(kd.grad().to(Device::cpu()));
    }
    expect_close(out[0], out[1], tol_for(DType::F32), "out");
    expect_close(dv[0], dv[1], tol_for(DType::F32), "dv");
    for (const Tensor& g : {dq[1], dk[1]})
      for (double x : g.to_double_vector()) CHECK(std::isfinite(x));
  }
}
