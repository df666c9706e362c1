// Checkpoints (train/run/checkpoint.h): weights round trip, the exact-resume guarantee,
// refusal of damaged or mismatching files without touching the model, atomic replacement, and (when
// python3 is there) an independent reader in Python.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/skip.h"
#include "tests/temp_dir.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/random.h"
#include "nn/layers.h"
#include "train/run/checkpoint.h"
#include "train/data/data_loader.h"
#include "train/optim/grad_utils.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "train/optim/schedule.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::contains;
using mixlab::testing::read_file_bytes;
using mixlab::testing::write_file_bytes;
namespace fs = std::filesystem;

namespace {

using mixlab::testing::TempDir;

constexpr int64_t kFeatures = 6, kClasses = 4;

// Linear → GELU → Dropout → Linear: dropout draws from default_generator(), so an exact resume
// needs the generator's state as well as the weights, moments and data order.
struct Mlp : Module {
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Dropout> drop;
  Mlp(int64_t hidden, uint64_t seed) {
    Generator gen(seed);
    fc1 = register_module("fc1", std::make_shared<Linear>(kFeatures, hidden, true, gen));
    drop = register_module("drop", std::make_shared<Dropout>(0.25));
    fc2 = register_module("fc2", std::make_shared<Linear>(hidden, kClasses, true, gen));
  }
  std::string type_name() const override { return "Mlp"; }
  Tensor forward(const Tensor& x) const {
    return fc2->forward(drop->forward(gelu(fc1->forward(x))));
  }
};

// Parameters and buffers of every dtype a checkpoint stores.
struct Mixed : Module {
  std::shared_ptr<Linear> fc;
  Tensor w64, counts;
  explicit Mixed(uint64_t seed) {
    Generator gen(seed);
    fc = register_module("fc", std::make_shared<Linear>(3, 2, true, gen));
    w64 = register_parameter("w64", Tensor::uniform({2, 3}, -1, 1, gen, DType::F64));
    std::vector<int32_t> c;
    for (int i = 0; i < 4; ++i) c.push_back(static_cast<int32_t>(gen.below(100)));
    counts = register_buffer("counts", Tensor::from_data(c, {4}));
  }
  std::string type_name() const override { return "Mixed"; }
};

InMemoryDataset make_data(size_t n) {
  Generator gen(42);
  std::vector<Example> examples(n);
  for (auto& e : examples) {
    for (int64_t f = 0; f < kFeatures; ++f)
      e.features.push_back(static_cast<float>(gen.uniform(-1, 1)));
    e.label = static_cast<int32_t>(gen.below(kClasses));
  }
  return InMemoryDataset(std::move(examples));
}

DataLoaderOptions loader_options() {
  DataLoaderOptions o;
  o.batch_size = 8;  // 40 examples: 5 batches an epoch
  o.shuffle = true;
  o.seed = 11;
  return o;
}

// Everything one run owns; rebuilt from scratch to simulate a new process.
struct TrainingRun {
  std::shared_ptr<Mlp> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<DataLoader> loader;
  WarmupCosineSchedule schedule{3e-2, 4, 20, 1e-3};
  TrainingState state;

  TrainingRun(const Dataset& data, uint64_t init_seed) {
    model = std::make_shared<Mlp>(12, init_seed);
    optimizer = std::make_unique<AdamW>(param_groups(*model, 0.05), AdamOptions{});
    loader = std::make_unique<DataLoader>(data, loader_options());
  }

  void start() { loader->start_epoch(0); }

  void train(int64_t steps) {
    Batch batch;
    for (int64_t i = 0; i < steps; ++i) {
      while (!loader->next(batch)) loader->start_epoch(loader->epoch() + 1);
      Tensor x = Tensor::from_data(batch.features, {batch.size, kFeatures});
      Tensor y = Tensor::from_data(batch.labels, {batch.size});
      optimizer->set_lr(schedule.lr_at(state.step + 1));
      optimizer->zero_grad();
      cross_entropy(model->forward(x), y).backward();
      clip_grad_norm(model->parameters(), 1.0);
      optimizer->step();
      ++state.step;
    }
    state.epoch = loader->epoch();
    state.loader_position = loader->position();
    capture_rng(state);
  }
};

using Snapshot = std::map<std::string, std::vector<double>>;
Snapshot tensor_values(const Module& m) {
  Snapshot out;
  for (const auto& [name, t] : m.named_tensors()) out[name] = t.to_double_vector();
  return out;
}

std::string thrown_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The path of a checkpoint of a briefly trained Mlp (3 AdamW steps).
std::string trained_checkpoint(const TempDir& dir, const Dataset& data) {
  manual_seed(5);
  TrainingRun run(data, 1);
  run.start();
  run.train(3);
  const std::string path = dir.file("ckpt.safetensors");
  save_checkpoint(path, *run.model, *run.optimizer, run.state);
  return path;
}

size_t header_end(const std::vector<uint8_t>& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  return 8 + static_cast<size_t>(n);
}

}  // namespace

TEST_CASE("checkpoint: weights round trip keeps every name dtype and bit") {
  TempDir dir;
  Mixed a(1), b(2);
  REQUIRE(tensor_values(a) != tensor_values(b));
  save_weights(dir.file("w.safetensors"), a, {{"note", "hello"}});
  auto meta = load_weights(dir.file("w.safetensors"), b);
  CHECK(meta.at("note") == "hello");
  CHECK(meta.at("mixlab.format") == "weights/1");
  CHECK(tensor_values(a) == tensor_values(b));
  CHECK(b.w64.dtype() == DType::F64);
  CHECK(b.counts.dtype() == DType::I32);
  CHECK(b.counts.to_int_vector() == a.counts.to_int_vector());
  // The module's own handles were updated in place (an optimizer holding them sees the data).
  CHECK(b.fc->weight.to_float_vector() == a.fc->weight.to_float_vector());
  CHECK(b.fc->weight.requires_grad());

  CHECK_THROWS_AS(save_weights(dir.file("x.safetensors"), a, {{"mixlab.format", "x"}}), Error);
}

TEST_CASE("checkpoint: averaging gives the element-wise mean and refuses other models") {
  TempDir dir;
  Mixed a(1), b(1), into(7);
  {
    NoGradGuard no_grad;
    b.fc->weight.copy_(Tensor::uniform({2, 3}, -1, 1, default_generator()));
    b.w64.copy_(Tensor::uniform({2, 3}, -1, 1, default_generator(), DType::F64));
  }
  save_weights(dir.file("a.safetensors"), a, {{"config", "{}"}, {"note", "dropped"}});
  save_weights(dir.file("b.safetensors"), b);
  average_checkpoints({dir.file("a.safetensors"), dir.file("b.safetensors")},
                      dir.file("avg.safetensors"));
  auto meta = load_weights(dir.file("avg.safetensors"), into);
  CHECK(meta.at("config") == "{}");  // the first file's configuration travels with the mean
  CHECK(meta.count("note") == 0);
  auto wa = a.fc->weight.to_double_vector(), wb = b.fc->weight.to_double_vector();
  auto wm = into.fc->weight.to_double_vector();
  for (size_t i = 0; i < wm.size(); ++i) CHECK(wm[i] == doctest::Approx((wa[i] + wb[i]) / 2));
  auto da = a.w64.to_double_vector(), db = b.w64.to_double_vector();
  auto dm = into.w64.to_double_vector();
  for (size_t i = 0; i < dm.size(); ++i) CHECK(dm[i] == (da[i] + db[i]) / 2);
  CHECK(into.counts.to_int_vector() == a.counts.to_int_vector());

  // Another model, or equal shapes with different integer buffers: refused, nothing written.
  Mlp other(5, 3);
  save_weights(dir.file("other.safetensors"), other);
  CHECK_THROWS_WITH_AS(
      average_checkpoints({dir.file("a.safetensors"), dir.file("other.safetensors")},
                          dir.file("bad.safetensors")),
      doctest::Contains("holds other tensors"), Error);
  Mixed c(2);
  save_weights(dir.file("c.safetensors"), c);
  CHECK_THROWS_WITH_AS(average_checkpoints({dir.file("a.safetensors"), dir.file("c.safetensors")},
                                           dir.file("bad.safetensors")),
                       doctest::Contains("integer tensor 'counts' differs"), Error);
  CHECK_FALSE(fs::exists(dir.file("bad.safetensors")));
}

TEST_CASE("checkpoint: exact resume gives bit-identical weights") {
  InMemoryDataset data = make_data(40);
  // 7 stops inside epoch 1; 5 stops exactly at the end of epoch 0.
  for (int64_t n : {7, 5}) {
    CAPTURE(n);
    TempDir dir;
    const std::string path = dir.file("resume.safetensors");

    const std::string config = R"({"model":"mlp","hidden":12})";
    manual_seed(1234);
    TrainingRun straight(data, 3);
    straight.state.config_json = config;
    straight.start();
    straight.train(2 * n);

    manual_seed(1234);
    TrainingRun first(data, 3);
    first.start();
    first.state.config_json = config;
    first.train(n);
    save_checkpoint(path, *first.model, *first.optimizer, first.state);

    // A new "process": other initial weights, another generator state, fresh loader.
    manual_seed(999);
    default_generator().next_u64();
    TrainingRun second(data, 77);
    second.state = load_checkpoint(path, *second.model, *second.optimizer);
    CHECK(second.state == first.state);
    restore_rng(second.state);
    second.loader->start_epoch(second.state.epoch, second.state.loader_position);
    second.train(n);

    CHECK(second.state.step == 2 * n);
    CHECK(second.state == straight.state);
    auto a = straight.model->named_tensors();
    auto b = second.model->named_tensors();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(a[i].first);
      CHECK(a[i].second.to_float_vector() == b[i].second.to_float_vector());  // raw floats, ==
    }
    auto sa = straight.optimizer->state_tensors();
    auto sb = second.optimizer->state_tensors();
    REQUIRE(sa.size() == sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      CHECK(sa[i].first == sb[i].first);
      CHECK(sa[i].second.to_float_vector() == sb[i].second.to_float_vector());
    }
  }
}

TEST_CASE("checkpoint: training state round trips every field") {
  TempDir dir;
  Mlp model(4, 1);
  Sgd optimizer(param_groups(model, 0.01), SgdOptions{0.1, 0.9});
  TrainingState state;
  state.step = 123456789012;
  state.epoch = 17;
  state.loader_position = 3;
  state.rng_seed = std::numeric_limits<uint64_t>::max();
  state.rng_counter = 98765;
  state.config_json = R"({"lr":0.001,"name":"ünïcode"})";
  state.vocab_src = "<pad>\n<bos>\n<eos>\n<unk>\na\nb\n";
  state.vocab_tgt = "<pad>\n<bos>\n<eos>\n<unk>\nä\n\"q\"\n";
  state.extra = {{"git", "abc123"}, {"note", "line1\nline2"}};
  save_checkpoint(dir.file("c.safetensors"), model, optimizer, state);
  Mlp other(4, 2);
  Sgd other_opt(param_groups(other, 0.01), SgdOptions{0.1, 0.9});
  CHECK(load_checkpoint(dir.file("c.safetensors"), other, other_opt) == state);
  CHECK(tensor_values(other) == tensor_values(model));

  state.config_json = "{not json";
  CHECK_THROWS_AS(save_checkpoint(dir.file("d.safetensors"), model, optimizer, state), Error);
  CHECK_FALSE(fs::exists(dir.file("d.safetensors")));
}

TEST_CASE("checkpoint: load_weights reads a training checkpoint and not the reverse") {
  TempDir dir;
  InMemoryDataset data = make_data(40);
  const std::string path = trained_checkpoint(dir, data);
  Mlp fresh(12, 9);
  auto meta = load_weights(path, fresh);
  CHECK(meta.at("mixlab.format") == "training_checkpoint/1");
  CHECK(meta.at("step") == "3");

  save_weights(dir.file("w.safetensors"), fresh);
  AdamW opt(param_groups(fresh, 0.0), AdamOptions{});
  CHECK(contains(thrown_message([&] { load_checkpoint(dir.file("w.safetensors"), fresh, opt); }),
                 "load_weights"));
}

TEST_CASE("checkpoint: damaged files are refused whole and the model is untouched") {
  TempDir dir;
  InMemoryDataset data = make_data(40);
  const std::string path = trained_checkpoint(dir, data);
  const std::vector<uint8_t> good = read_file_bytes(path);
  const size_t header = header_end(good);
  REQUIRE(header < good.size());

  Mlp model(12, 9);
  AdamW optimizer(param_groups(model, 0.05), AdamOptions{});
  const Snapshot before = tensor_values(model);
  const std::string bad = dir.file("bad.safetensors");
  auto refused = [&](const std::vector<uint8_t>& bytes) {
    write_file_bytes(bad, bytes);
    bool threw = false;
    try {
      load_checkpoint(bad, model, optimizer);
    } catch (const Error&) {
      threw = true;
    }
    bool weights_threw = false;
    try {
      load_weights(bad, model);
    } catch (const Error&) {
      weights_threw = true;
    }
    return threw && weights_threw && tensor_values(model) == before &&
           optimizer.state_tensors().empty() && optimizer.steps_taken() == 0;
  };

  SUBCASE("truncated") {
    for (size_t keep : {size_t{0}, size_t{4}, size_t{8}, header - 1, header, header + 3,
                        good.size() / 2, good.size() - 1}) {
      CAPTURE(keep);
      CHECK(refused(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(keep))));
    }
  }
  SUBCASE("one bit flipped anywhere in the header") {
    // Each flip either breaks the structure safetensors checks or changes content that the
    // checksum covers (a metadata value such as the step count, a name, a shape).
    int failures = 0;
    for (size_t i = 0; i < header; ++i) {
      std::vector<uint8_t> bytes = good;
      bytes[i] ^= static_cast<uint8_t>(1u << (i % 8));
      if (!refused(bytes)) {
        ++failures;
        MESSAGE("accepted a flip at byte " << i);
      }
    }
    CHECK(failures == 0);
  }
  SUBCASE("one byte flipped in the tensor data") {
    for (size_t i : {header, (header + good.size()) / 2, good.size() - 1}) {
      std::vector<uint8_t> bytes = good;
      bytes[i] ^= 0x40;
      CAPTURE(i);
      CHECK(refused(bytes));
    }
    write_file_bytes(bad, [&] {
      std::vector<uint8_t> bytes = good;
      bytes[good.size() - 1] ^= 0x40;
      return bytes;
    }());
    CHECK(contains(thrown_message([&] { load_weights(bad, model); }), "checksum"));
  }
  // The undamaged file does load.
  load_checkpoint(path, model, optimizer);
  CHECK(tensor_values(model) != before);
}

TEST_CASE("checkpoint: a model of another shape lists the names and both shapes") {
  TempDir dir;
  Mlp small(12, 1);
  save_weights(dir.file("w.safetensors"), small);
  Mlp wide(16, 2);
  const Snapshot before = tensor_values(wide);
  const std::string msg = thrown_message([&] { load_weights(dir.file("w.safetensors"), wide); });
  CAPTURE(msg);
  CHECK(contains(msg, "fc1.weight (file [12,6] F32, model [16,6] F32)"));
  CHECK(contains(msg, "fc1.bias (file [12] F32, model [16] F32)"));
  CHECK(contains(msg, "fc2.weight (file [4,12] F32, model [4,16] F32)"));
  CHECK_FALSE(contains(msg, "fc2.bias"));  // that one matches
  CHECK(tensor_values(wide) == before);    // not even the matching fc2.bias was loaded

  SUBCASE("missing and unexpected names") {
    Mixed mixed(1);
    const std::string m = thrown_message([&] { load_weights(dir.file("w.safetensors"), mixed); });
    CAPTURE(m);
    CHECK(contains(m, "missing from the file: w64, counts"));
    CHECK(contains(m, "not in the model: fc1.bias, fc1.weight, fc2.bias, fc2.weight"));
  }
  SUBCASE("dtype mismatch") {
    Mixed a(1), b(2);
    b.to(DType::F64);
    save_weights(dir.file("m.safetensors"), b);
    const std::string m = thrown_message([&] { load_weights(dir.file("m.safetensors"), a); });
    CAPTURE(m);
    CHECK(contains(m, "fc.weight (file [2,3] F64, model [2,3] F32)"));
  }
}

TEST_CASE("checkpoint: a failed write leaves the previous checkpoint intact") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Mlp a(12, 1), b(12, 2);
  AdamW opt(param_groups(a, 0.05), AdamOptions{});
  save_checkpoint(path, a, opt, TrainingState{});
  const std::vector<uint8_t> original = read_file_bytes(path);

  // A directory where the writer's temporary file must go (io/atomic_file.h names it
  // temporary_path): the write cannot even start.
  const std::string temp = temporary_path(path, ::getpid());
  fs::create_directories(temp);
  CHECK_THROWS_AS(save_checkpoint(path, b, opt, TrainingState{}), Error);
  CHECK_THROWS_AS(save_weights(path, b), Error);
  fs::remove_all(temp);
  CHECK(read_file_bytes(path) == original);

  // A target that cannot be written at all.
  CHECK_THROWS_AS(save_weights(dir.file("no/such/dir/w.safetensors"), b), Error);
  CHECK_THROWS_AS(save_weights(dir.path(), b), Error);  // the path is a directory

  Mlp c(12, 3);
  load_weights(path, c);
  CHECK(tensor_values(c) == tensor_values(a));
}

TEST_CASE("checkpoint: python reads a mixlab checkpoint independently") {
  if (std::system("python3 -c 'import json, struct, zlib' > /dev/null 2>&1") != 0) {
    MIXLAB_SKIP_TEST("python3 is not available");
  }
  TempDir dir;
  InMemoryDataset data = make_data(40);
  const std::string path = trained_checkpoint(dir, data);

  // What Python must find: every tensor (model and optimizer) with dtype, shape and values.
  Mlp model(12, 9);
  AdamW optimizer(param_groups(model, 0.05), AdamOptions{});
  TrainingState state = load_checkpoint(path, model, optimizer);
  Json expected = Json::object();
  auto add = [&](const std::string& name, const Tensor& t) {
    Json entry = Json::object();
    entry.set("dtype", t.dtype() == DType::F32 ? "F32" : "F64");
    Json shape = Json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    entry.set("shape", shape);
    Json values = Json::array();
    for (double v : t.to_double_vector()) values.push_back(v);
    entry.set("values", values);
    expected.set(name, entry);
  };
  for (const auto& [name, t] : model.named_tensors()) add(name, t);
  for (const auto& [name, t] : optimizer.state_tensors()) add("optimizer." + name, t);
  Json doc = Json::object();
  doc.set("tensors", expected);
  doc.set("step", std::to_string(state.step));
  {
    std::ofstream out(dir.file("expected.json"));
    out << doc.dump();
  }
  // Uses the safetensors package when installed; otherwise a reader from the standard library.
  // Either way the CRC-32 checksum is recomputed here from its definition in checkpoint.cpp.
  const char* script = R"PY(
import json, struct, sys, zlib
path, expected_path = sys.argv[1], sys.argv[2]
doc = json.load(open(expected_path))
raw = open(path, 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + n].decode('utf-8'))
meta = header.pop('__metadata__')
body = raw[8 + n:]
size = {'F32': 4, 'F64': 8, 'I32': 4}
fmt = {'F32': 'f', 'F64': 'd', 'I32': 'i'}
tensors = {}
for name, info in header.items():
    b, e = info['data_offsets']
    count = (e - b) // size[info['dtype']]
    values = list(struct.unpack('<%d%s' % (count, fmt[info['dtype']]), body[b:e]))
    tensors[name] = (info['dtype'], info['shape'], values, body[b:e])
reader = 'stdlib'
try:
    from safetensors.numpy import load_file
    arrays = load_file(path)
    assert set(arrays) == set(tensors)
    for name, a in arrays.items():
        assert list(a.shape) == tensors[name][1], name
        assert [float(v) for v in a.ravel()] == tensors[name][2], name
    reader = 'safetensors'
except ImportError:
    pass
exp = doc['tensors']
assert set(tensors) == set(exp), (sorted(tensors), sorted(exp))
for name, (dtype, shape, values, _) in tensors.items():
    assert dtype == exp[name]['dtype'], name
    assert shape == exp[name]['shape'], name
    assert values == exp[name]['values'], name
assert meta['step'] == doc['step']
assert meta['mixlab.format'] == 'training_checkpoint/1'
assert json.loads(meta['optimizer'])['type'] == 'AdamW'
crc = 0
def add(b):
    global crc
    crc = zlib.crc32(b, crc)
for k in sorted(meta, key=lambda s: s.encode()):
    if k != 'mixlab.checksum':
        add(k.encode() + b'\0'); add(meta[k].encode() + b'\0')
for name in sorted(tensors, key=lambda s: s.encode()):
    dtype, shape, _, data = tensors[name]
    add(name.encode() + b'\0'); add(dtype.encode() + b'\0')
    add(struct.pack('<q', len(shape)))
    for d in shape: add(struct.pack('<q', d))
    add(struct.pack('<q', len(data))); add(data)
assert meta['mixlab.checksum'] == 'crc32:%08x' % crc, (meta['mixlab.checksum'], crc)
print('ok', reader, len(tensors))
)PY";
  {
    std::ofstream out(dir.file("check.py"));
    out << script;
  }
  const std::string command = "python3 " + dir.file("check.py") + " " + path + " " +
                              dir.file("expected.json") + " > " + dir.file("out.txt") + " 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream in(dir.file("out.txt"));
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("python said: " << output);
  CHECK(rc == 0);
  CHECK(output.rfind("ok ", 0) == 0);
  MESSAGE("python cross-check: " << output);
}

// Needs a CUDA device (skipped without one; tests/gpu/check.sh runs it): files are
// device-independent.
TEST_CASE("cuda: checkpoint weights move between CPU and CUDA models" *
          doctest::skip(!device_available(DeviceType::CUDA))) {
  TempDir dir;
  Mixed cpu_model(1);
  save_weights(dir.file("cpu.safetensors"), cpu_model);
  Mixed gpu_model(2);
  gpu_model.to(Device::cuda());
  load_weights(dir.file("cpu.safetensors"), gpu_model);
  CHECK(gpu_model.fc->weight.device() == Device::cuda());
  CHECK(tensor_values(gpu_model) == tensor_values(cpu_model));

  // A training checkpoint written from CUDA state loads into a CPU run.
  AdamW gpu_opt(param_groups(gpu_model, 0.1), AdamOptions{});
  gpu_model.fc->weight.set_grad(Tensor::ones({2, 3}, DType::F32, Device::cuda()));
  gpu_opt.step();
  save_checkpoint(dir.file("gpu.safetensors"), gpu_model, gpu_opt, TrainingState{});
  Mixed back(3);
  AdamW cpu_opt(param_groups(back, 0.1), AdamOptions{});
  load_checkpoint(dir.file("gpu.safetensors"), back, cpu_opt);
  CHECK(tensor_values(back) == tensor_values(gpu_model));
  auto sg = gpu_opt.state_tensors();
  auto sc = cpu_opt.state_tensors();
  REQUIRE(sg.size() == sc.size());
  for (size_t i = 0; i < sg.size(); ++i) {
    CHECK(sc[i].second.device() == Device::cpu());
    CHECK(sc[i].second.to_float_vector() == sg[i].second.to_float_vector());
  }
}
