#include "train/run/checkpoint.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>

#include <zlib.h>

#include "autograd/grad_mode.h"
#include "core/strings.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train/run/checkpoint_names.h"
#include "train/run/float16.h"

namespace mixlab {

// Tensor bytes go to and from the file as they lie in memory; safetensors is little-endian.
static_assert(std::endian::native == std::endian::little,
              "checkpoints assume a little-endian host");

namespace {

constexpr const char* kFormatKey = "mixlab.format";
constexpr const char* kChecksumKey = "mixlab.checksum";
constexpr const char* kWeightsFormat = "weights/1";
constexpr const char* kTrainingFormat = "training_checkpoint/1";
const std::string kOptimizerPrefix = "optimizer.";
const char* file_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F64:
      return "F64";
    case DType::I32:
      return "I32";
  }
  return "?";
}

bool parse_file_dtype(const std::string& name, DType& out) {
  if (name == "F32")
    out = DType::F32;
  else if (name == "F64")
    out = DType::F64;
  else if (name == "I32")
    out = DType::I32;
  else
    return false;
  return true;
}

// The tensor's bytes in row-major order, copied straight from its device.
TensorRecord to_record(const std::string& name, const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor c = t.contiguous();
  TensorRecord record;
  record.name = name;
  record.dtype = file_dtype(c.dtype());
  record.shape = c.shape();
  record.bytes.resize(static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  if (!record.bytes.empty())
    backend_for(c.device()).copy_to_host(record.bytes.data(), c.raw_data(), record.bytes.size());
  return record;
}

// A new tensor on `device` holding the record (whose dtype was already checked).
Tensor from_record(const TensorRecord& record, Device device) {
  DType dtype = DType::F32;
  check(parse_file_dtype(record.dtype, dtype), "tensor '", record.name, "' has dtype ",
        record.dtype, "; mixlab loads F32, F64 and I32");
  Tensor t = Tensor::empty(record.shape, dtype, device);
  if (!record.bytes.empty())
    backend_for(device).copy_from_host(t.raw_data(), record.bytes.data(), record.bytes.size());
  return t;
}

// ---- checksum: CRC-32 over the metadata (except itself) and every tensor, in name order ----
class Crc {
 public:
  void add(const void* data, size_t size) {
    const auto* p = static_cast<const Bytef*>(data);
    while (size > 0) {  // zlib takes uInt lengths
      const uInt chunk = static_cast<uInt>(std::min<size_t>(size, UINT_MAX));
      crc_ = crc32(crc_, p, chunk);
      p += chunk;
      size -= chunk;
    }
  }
  // Strings end with a NUL so that ("ab", "c") and ("a", "bc") differ.
  void add(const std::string& s) { add(s.c_str(), s.size() + 1); }
  void add(int64_t v) { add(&v, sizeof v); }
  uLong value() const { return crc_; }

 private:
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

std::string checksum(const std::vector<const TensorRecord*>& records,
                     const std::map<std::string, std::string>& metadata) {
  Crc crc;
  for (const auto& [key, value] : metadata) {
    if (key == kChecksumKey) continue;
    crc.add(key);
    crc.add(value);
  }
  std::vector<const TensorRecord*> sorted = records;
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorRecord* a, const TensorRecord* b) { return a->name < b->name; });
  for (const TensorRecord* r : sorted) {
    crc.add(r->name);
    crc.add(r->dtype);
    crc.add(static_cast<int64_t>(r->shape.size()));
    for (int64_t d : r->shape) crc.add(d);
    crc.add(static_cast<int64_t>(r->bytes.size()));
    crc.add(r->bytes.data(), r->bytes.size());
  }
  char text[16];
  std::snprintf(text, sizeof text, "%08lx", static_cast<unsigned long>(crc.value()));
  return std::string("crc32:") + text;
}

void write_file(const std::string& path, const std::vector<TensorRecord>& records,
                std::map<std::string, std::string> metadata) {
  std::vector<const TensorRecord*> pointers;
  for (const auto& r : records) pointers.push_back(&r);
  metadata[kChecksumKey] = checksum(pointers, metadata);
  save_safetensors(path, records, metadata);
}

// What every loader sees, whatever wrote the file: current key names (checkpoint_names.h), also
// in the optimizer's per-parameter steps, and F16 tensors (exports) widened to F32.
// Two names of one tensor (an old and a current one, e.g. decoder.0.ffn.fc2.bias and
// decoder.layers.0.ffn.fc2.bias) are refused naming both: which one to load is not the loader's
// guess to make.
void upgrade_in_memory(SafetensorsFile& file, const std::string& path) {
  std::map<std::string, std::string> original;  // current name -> the name in the file
  for (TensorRecord& r : file.tensors) {
    const std::string current = current_checkpoint_key(r.name);
    auto [it, inserted] = original.emplace(current, r.name);
    check(inserted, "checkpoint '", path, "' is ambiguous: it holds '", it->second, "' and '",
          r.name, "', two names of the tensor '", current, "'; nothing was loaded");
    r.name = current;
    if (r.dtype != "F16") continue;
    std::vector<uint8_t> wide(r.bytes.size() * 2);
    for (size_t i = 0; i < r.bytes.size() / 2; ++i) {
      const float v =
          half_to_float(static_cast<uint16_t>(r.bytes[2 * i] | r.bytes[2 * i + 1] << 8));
      std::memcpy(wide.data() + 4 * i, &v, 4);
    }
    r.bytes = std::move(wide);
    r.dtype = "F32";
  }
  std::sort(file.tensors.begin(), file.tensors.end(),
            [](const TensorRecord& a, const TensorRecord& b) { return a.name < b.name; });
  auto optimizer = file.metadata.find("optimizer");
  if (optimizer == file.metadata.end()) return;
  Json state;
  try {
    state = Json::parse(optimizer->second);
  } catch (const Error&) {
    return;  // load_checkpoint reports it, naming the file
  }
  const Json* steps = state.find("param_steps");
  if (steps == nullptr || steps->type() != Json::Type::Object) return;
  Json renamed = Json::object();
  for (const auto& [key, value] : steps->as_object())
    renamed.set(current_checkpoint_key(key), value);
  state.set("param_steps", std::move(renamed));
  optimizer->second = state.dump();
}

// The number of NaN and infinite elements of a float record, and the index of the first one.
template <typename T>
std::pair<int64_t, int64_t> count_non_finite(const std::vector<uint8_t>& bytes) {
  int64_t count = 0, first = -1;
  const int64_t n = static_cast<int64_t>(bytes.size() / sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    if (!std::isfinite(v)) {
      if (first < 0) first = i;
      ++count;
    }
  }
  return {count, first};
}

// A model or optimizer tensor holding NaN or infinity comes from a run that diverged: loading it
// would only carry the NaN on silently (every later loss and prediction NaN), so it is refused,
// naming the tensor. The checksum is checked first, so this is never a damaged file.
void check_finite(const SafetensorsFile& file, const std::string& path) {
  for (const auto& r : file.tensors) {
    std::pair<int64_t, int64_t> bad{0, -1};
    if (r.dtype == "F32") bad = count_non_finite<float>(r.bytes);
    if (r.dtype == "F64") bad = count_non_finite<double>(r.bytes);
    if (bad.first == 0) continue;
    double first = 0;
    if (r.dtype == "F32") {
      float v;
      std::memcpy(&v, r.bytes.data() + bad.second * sizeof v, sizeof v);
      first = v;
    } else {
      std::memcpy(&first, r.bytes.data() + bad.second * sizeof first, sizeof first);
    }
    fail("checkpoint '", path, "': tensor '", r.name, "' holds ", bad.first,
         " non-finite value(s) (the first, element ", bad.second, ", is ", first,
         "); the run that wrote it diverged, so it is not loaded");
  }
}

// The whole file, structurally validated (load_safetensors), checksum-verified, and with every
// float tensor finite.
SafetensorsFile read_file(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  auto it = file.metadata.find(kChecksumKey);
  // Our own files always carry one: a missing checksum there is damage (a flipped key name).
  check(it != file.metadata.end() || !file.metadata.count(kFormatKey), "checkpoint '", path,
        "' is corrupt: it has ", kFormatKey, " but no ", kChecksumKey);
  if (it != file.metadata.end()) {
    std::vector<const TensorRecord*> pointers;
    for (const auto& r : file.tensors) pointers.push_back(&r);
    const std::string actual = checksum(pointers, file.metadata);
    check(actual == it->second, "checkpoint '", path, "' is corrupt: its checksum is ", it->second,
          " but its content gives ", actual);
  }
  upgrade_in_memory(file, path);
  check_finite(file, path);  // after widening, so an f16 export is checked too
  return file;
}

std::vector<TensorRecord> model_records(const Module& model) {
  std::vector<TensorRecord> records;
  for (const auto& [name, t] : model.named_tensors()) records.push_back(to_record(name, t));
  return records;
}

// Model tensors paired with their new values, ready to copy once everything has validated.
struct StagedCopies {
  std::vector<std::pair<Tensor, Tensor>> copies;  // (model tensor, value on its device)
  void commit() {
    NoGradGuard no_grad;
    for (auto& [target, value] : copies) target.copy_(value);
  }
};

StagedCopies stage_model(const SafetensorsFile& file, const Module& model,
                         bool skip_optimizer_tensors, const std::string& path) {
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> model_names;
  StagedCopies staged;
  for (const auto& [name, t] : model.named_tensors()) {
    model_names.insert(name);
    const TensorRecord* record = file.find(name);
    if (record == nullptr) {
      missing.push_back(name);
      continue;
    }
    DType dtype = DType::F32;
    const bool known = parse_file_dtype(record->dtype, dtype);
    if (!known || dtype != t.dtype() || record->shape != t.shape()) {
      mismatched.push_back(name + " (file " + shape_str(record->shape) + " " + record->dtype +
                           ", model " + shape_str(t.shape()) + " " + file_dtype(t.dtype()) + ")");
      continue;
    }
    staged.copies.emplace_back(t, from_record(*record, t.device()));
  }
  for (const auto& r : file.tensors) {
    if (skip_optimizer_tensors && r.name.starts_with(kOptimizerPrefix)) continue;
    if (!model_names.count(r.name)) unexpected.push_back(r.name);
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string message;
    if (!missing.empty()) message += "; missing from the file: " + join(missing);
    if (!unexpected.empty()) message += "; not in the model: " + join(unexpected);
    if (!mismatched.empty()) message += "; shape/dtype mismatch: " + join(mismatched);
    fail("loading '", path, "': the file does not match the model (nothing was loaded)", message);
  }
  return staged;
}

template <typename T>
T parse_integer(const std::map<std::string, std::string>& metadata, const std::string& key,
                const std::string& path) {
  auto it = metadata.find(key);
  check(it != metadata.end(), "checkpoint '", path, "': metadata has no '", key, "'");
  const std::string& text = it->second;
  T value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  check(error == std::errc() && end == text.data() + text.size() && !text.empty(), "checkpoint '",
        path, "': metadata '", key, "' = '", text, "' is not an integer");
  return value;
}

const std::string& metadata_at(const std::map<std::string, std::string>& metadata,
                               const std::string& key, const std::string& path) {
  auto it = metadata.find(key);
  check(it != metadata.end(), "checkpoint '", path, "': metadata has no '", key, "'");
  return it->second;
}

TrainingState parse_state(const std::map<std::string, std::string>& metadata,
                          const std::string& path) {
  TrainingState state;
  state.step = parse_integer<int64_t>(metadata, "step", path);
  state.epoch = parse_integer<int64_t>(metadata, "epoch", path);
  state.loader_position = parse_integer<int64_t>(metadata, "loader_position", path);
  check(state.step >= 0 && state.epoch >= 0 && state.loader_position >= 0, "checkpoint '", path,
        "': negative step, epoch or loader_position");
  state.rng_seed = parse_integer<uint64_t>(metadata, "rng_seed", path);
  state.rng_counter = parse_integer<uint64_t>(metadata, "rng_counter", path);
  state.config_json = metadata_at(metadata, "config", path);
  state.vocab_src = metadata_at(metadata, "vocab_src", path);
  state.vocab_tgt = metadata_at(metadata, "vocab_tgt", path);
  try {
    const Json extra = Json::parse(metadata_at(metadata, "extra", path));  // outlives the loop
    for (const auto& [key, value] : extra.as_object()) state.extra[key] = value.as_string();
  } catch (const Error& e) {
    fail("checkpoint '", path, "': metadata 'extra': ", e.what());
  }
  return state;
}

void check_user_metadata(const std::map<std::string, std::string>& metadata) {
  for (const auto& [key, value] : metadata)
    check(!key.starts_with("mixlab."), "save_weights: metadata key '", key,
          "' is reserved (mixlab.*)");
}

}  // namespace

void save_weights(const std::string& path, const Module& model,
                  const std::map<std::string, std::string>& metadata) {
  check_user_metadata(metadata);
  std::map<std::string, std::string> all = metadata;
  all[kFormatKey] = kWeightsFormat;
  write_file(path, model_records(model), std::move(all));
}

std::map<std::string, std::string> load_weights(const std::string& path, Module& model) {
  SafetensorsFile file = read_file(path);
  auto format = file.metadata.find(kFormatKey);
  const bool training = format != file.metadata.end() && format->second == kTrainingFormat;
  stage_model(file, model, training, path).commit();
  return file.metadata;
}

namespace {

// Writes into `mean` (a copy of the first file's record) the element-wise mean of tensor `name`
// over `files`, summed in float64 and rounded once to T.
template <typename T>
void store_mean(TensorRecord& mean, const std::vector<SafetensorsFile>& files,
                const std::string& name) {
  std::vector<double> sum(mean.bytes.size() / sizeof(T), 0.0);
  for (const auto& file : files) {
    const T* v = reinterpret_cast<const T*>(file.at(name).bytes.data());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += static_cast<double>(v[i]);
  }
  T* out = reinterpret_cast<T*>(mean.bytes.data());
  for (size_t i = 0; i < sum.size(); ++i)
    out[i] = static_cast<T>(sum[i] / static_cast<double>(files.size()));
}

// What inference needs from a file's metadata: the model configuration, the vocabularies and the
// extra strings (eval and run rebuild the model and its data from them). Other keys (the training
// state, the optimizer's, anything unknown) stay behind. A new key that inference needs is added
// here, and export and average both carry it.
std::map<std::string, std::string> inference_metadata(const SafetensorsFile& file) {
  std::map<std::string, std::string> metadata;
  for (const char* key : {"config", "vocab_src", "vocab_tgt", "extra"}) {
    auto it = file.metadata.find(key);
    if (it != file.metadata.end()) metadata[key] = it->second;
  }
  return metadata;
}

// The record's F32 values rounded to F16; a finite value beyond the F16 range is an error.
void narrow_to_half(TensorRecord& record) {
  std::vector<uint8_t> narrow(record.bytes.size() / 2);
  for (size_t i = 0; i < narrow.size() / 2; ++i) {
    float v;
    std::memcpy(&v, record.bytes.data() + 4 * i, 4);
    const uint16_t h = float_to_half(v);
    check(!std::isfinite(v) || (h & 0x7c00u) != 0x7c00u, "export: tensor '", record.name,
          "' holds ", v, ", beyond the float16 range (|x| < 65520); export it as f32");
    narrow[2 * i] = static_cast<uint8_t>(h & 0xffu);
    narrow[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  record.bytes = std::move(narrow);
  record.dtype = "F16";
}

// What must agree between checkpoints for their mean to be a model: the configuration (all but
// the seed and the dropout rate, which shape no weight), both vocabularies (a token's row means
// another token otherwise) and the label names (a class's row). Returns what differs, or "".
std::string model_difference(const SafetensorsFile& a, const SafetensorsFile& b) {
  auto get = [](const SafetensorsFile& f, const char* key) {
    auto it = f.metadata.find(key);
    return it == f.metadata.end() ? std::string() : it->second;
  };
  auto config = [&](const SafetensorsFile& f) {
    const std::string text = get(f, "config");
    // A file without one (weights from another tool) is compared by its tensors alone.
    if (text.empty() || get(a, "config").empty() || get(b, "config").empty()) return Json();
    Json j = Json::parse(text);
    if (j.type() == Json::Type::Object) {
      j.set("seed", Json());
      j.set("dropout", Json());
    }
    return j;
  };
  // The label names of a classifier: extra["labels"] and the data description's "labels".
  auto labels = [&](const SafetensorsFile& f) {
    const std::string text = get(f, "extra");
    if (text.empty()) return std::string();
    const Json extra = Json::parse(text);
    std::string out;
    if (const Json* l = extra.find("labels")) out += l->dump();
    if (const Json* d = extra.find("data"); d && d->type() == Json::Type::String) {
      try {
        const Json data = Json::parse(d->as_string());
        if (const Json* l = data.find("labels")) out += l->dump();
      } catch (const Error&) {  // an older sentence, not JSON: it holds no labels
      }
    }
    return out;
  };
  try {
    const Json ca = config(a), cb = config(b);
    if (!(ca == cb)) {
      if (ca.type() == Json::Type::Object && cb.type() == Json::Type::Object) {
        for (const auto& [key, value] : ca.as_object()) {
          const Json* other = cb.find(key);
          if (!other || !(*other == value))
            return "model configuration: " + key + " " + value.dump() + " against " +
                   (other ? other->dump() : std::string("nothing"));
        }
      }
      return "model configuration";
    }
    if (get(a, "vocab_src") != get(b, "vocab_src")) return "source vocabulary";
    if (get(a, "vocab_tgt") != get(b, "vocab_tgt")) return "target vocabulary";
    if (labels(a) != labels(b)) return "label names";
  } catch (const Error& e) {
    return std::string("metadata (") + e.what() + ")";
  }
  return "";
}

}  // namespace

void export_weights(const std::string& input, const std::string& output, ExportDType dtype) {
  const SafetensorsFile file = read_file(input);
  std::vector<TensorRecord> records;
  for (const auto& r : file.tensors) {
    if (r.name.starts_with(kOptimizerPrefix)) continue;
    records.push_back(r);
    if (dtype == ExportDType::F16 && r.dtype == "F32") narrow_to_half(records.back());
  }
  std::map<std::string, std::string> metadata = inference_metadata(file);
  check(metadata.count("config") && !metadata["config"].empty(), "export: '", input,
        "' holds no model configuration (not a mixlab checkpoint?)");
  auto step = file.metadata.find("step");
  if (step != file.metadata.end()) metadata["exported_at_step"] = step->second;
  metadata["exported_dtype"] = dtype == ExportDType::F16 ? "F16" : "F32";
  metadata[kFormatKey] = kWeightsFormat;
  write_file(output, records, std::move(metadata));
}

void average_checkpoints(const std::vector<std::string>& inputs, const std::string& output,
                         const std::function<void(size_t read)>& progress) {
  check(!inputs.empty(), "average_checkpoints: no input files");
  std::vector<SafetensorsFile> files;
  for (const auto& path : inputs) {
    files.push_back(read_file(path));  // reading and checksumming is most of the time
    if (progress) progress(files.size());
  }
  const SafetensorsFile& first = files.front();
  auto is_model = [](const TensorRecord& r) { return !r.name.starts_with(kOptimizerPrefix); };
  // The same model tensors in every file, before any arithmetic.
  std::vector<std::string> names;
  for (const auto& r : first.tensors)
    if (is_model(r)) names.push_back(r.name);
  for (size_t f = 1; f < files.size(); ++f) {
    std::vector<std::string> other;
    for (const auto& r : files[f].tensors)
      if (is_model(r)) other.push_back(r.name);
    check(other == names, "average_checkpoints: '", inputs[f], "' holds other tensors than '",
          inputs[0], "' (", other.size(), " against ", names.size(), " model tensors)");
    for (const auto& name : names) {
      const TensorRecord &a = first.at(name), &b = files[f].at(name);
      check(a.dtype == b.dtype && a.shape == b.shape, "average_checkpoints: tensor '", name,
            "' is ", shape_str(b.shape), " ", b.dtype, " in '", inputs[f], "' but ",
            shape_str(a.shape), " ", a.dtype, " in '", inputs[0], "'");
      check(a.dtype != "I32" || a.bytes == b.bytes, "average_checkpoints: integer tensor '", name,
            "' differs between '", inputs[0], "' and '", inputs[f], "'");
    }
    // Same tensors and shapes can still be other models: other vocabularies or labels.
    const std::string difference = model_difference(first, files[f]);
    check(difference.empty(), "average_checkpoints: '", inputs[f], "' and '", inputs[0],
          "' are not checkpoints of one model: they differ in their ", difference,
          "; averaging them would give garbage");
  }
  std::vector<TensorRecord> records;
  for (const auto& name : names) {
    TensorRecord mean = first.at(name);
    if (mean.dtype == "F32") store_mean<float>(mean, files, name);
    if (mean.dtype == "F64") store_mean<double>(mean, files, name);
    records.push_back(std::move(mean));
  }
  std::map<std::string, std::string> metadata = inference_metadata(first);
  metadata["averaged_from"] = std::to_string(inputs.size()) + " files";
  metadata[kFormatKey] = kWeightsFormat;
  write_file(output, records, std::move(metadata));
}

std::string checkpoint_checksum(const std::vector<TensorRecord>& tensors,
                                const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorRecord*> pointers;
  for (const auto& r : tensors) pointers.push_back(&r);
  return checksum(pointers, metadata);
}

void capture_rng(TrainingState& state, const Generator& gen) {
  state.rng_seed = gen.seed();
  state.rng_counter = gen.counter();
}

void restore_rng(const TrainingState& state, Generator& gen) {
  gen.set_state(state.rng_seed, state.rng_counter);
}

void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const TrainingState& state) {
  check(state.step >= 0 && state.epoch >= 0 && state.loader_position >= 0,
        "save_checkpoint: negative step, epoch or loader_position");
  // Refuse a config that would not parse back, now rather than at resume time.
  if (!state.config_json.empty()) {
    try {
      Json::parse(state.config_json);
    } catch (const Error& e) {
      fail("save_checkpoint: config_json is not valid JSON: ", e.what());
    }
  }
  Json extra = Json::object();
  for (const auto& [key, value] : state.extra) extra.set(key, value);

  std::map<std::string, std::string> metadata;
  metadata[kFormatKey] = kTrainingFormat;
  metadata["step"] = std::to_string(state.step);
  metadata["epoch"] = std::to_string(state.epoch);
  metadata["loader_position"] = std::to_string(state.loader_position);
  metadata["rng_seed"] = std::to_string(state.rng_seed);
  metadata["rng_counter"] = std::to_string(state.rng_counter);
  metadata["config"] = state.config_json;
  metadata["vocab_src"] = state.vocab_src;
  metadata["vocab_tgt"] = state.vocab_tgt;
  metadata["extra"] = extra.dump();
  metadata["optimizer"] = optimizer.state_json().dump();

  std::vector<TensorRecord> records = model_records(model);
  for (const auto& r : records)
    check(!r.name.starts_with(kOptimizerPrefix), "save_checkpoint: model tensor '", r.name,
          "' collides with the optimizer prefix '", kOptimizerPrefix, "'");
  for (const auto& [name, t] : optimizer.state_tensors())
    records.push_back(to_record(kOptimizerPrefix + name, t));
  write_file(path, records, std::move(metadata));
}

TrainingState load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer) {
  SafetensorsFile file = read_file(path);
  auto format = file.metadata.find(kFormatKey);
  check(format != file.metadata.end() && format->second == kTrainingFormat, "load_checkpoint: '",
        path, "' is not a mixlab training checkpoint (", kFormatKey, " = '",
        format == file.metadata.end() ? std::string("<absent>") : format->second,
        "'); use load_weights for a weights file");
  TrainingState state = parse_state(file.metadata, path);
  StagedCopies staged = stage_model(file, model, true, path);

  std::map<std::string, Tensor> optimizer_tensors;
  for (const auto& r : file.tensors)
    if (r.name.starts_with(kOptimizerPrefix))
      optimizer_tensors[r.name.substr(kOptimizerPrefix.size())] = from_record(r, Device::cpu());
  try {
    // Validates completely before changing the optimizer; the model is still untouched here.
    optimizer.load_state(Json::parse(metadata_at(file.metadata, "optimizer", path)),
                         optimizer_tensors);
  } catch (const Error& e) {
    fail("load_checkpoint '", path, "': ", e.what());
  }
  staged.commit();
  return state;
}

}  // namespace mixlab
