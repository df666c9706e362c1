#include "io/safetensors.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <cstring>
#include <cerrno>
#include <fstream>
#include <functional>
#include <limits>
#include <ostream>
#include <set>
#include <string_view>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"

namespace mixlab {

namespace {

// The reference's header limit: a larger header is treated as corrupt rather than allocated.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

struct DtypeInfo {
  std::string_view name;
  int64_t size;
};

// In the reference's rank order (its Dtype enum), which fixes the data layout order.
constexpr std::array<DtypeInfo, 17> kDtypes = {{
    {"BOOL", 1},
    {"U8", 1},
    {"I8", 1},
    {"F8_E5M2", 1},
    {"F8_E4M3", 1},
    {"F8_E8M0", 1},
    {"I16", 2},
    {"U16", 2},
    {"F16", 2},
    {"BF16", 2},
    {"I32", 4},
    {"U32", 4},
    {"F32", 4},
    {"C64", 8},
    {"F64", 8},
    {"I64", 8},
    {"U64", 8},
}};

// Index into kDtypes, or -1.
int dtype_rank(std::string_view dtype) {
  for (size_t i = 0; i < kDtypes.size(); ++i) {
    if (kDtypes[i].name == dtype) return static_cast<int>(i);
  }
  return -1;
}

// Elements * element size, or -1 on a negative dimension or overflow of the int64 range.
int64_t byte_size(const std::vector<int64_t>& shape, int64_t element_size) {
  int64_t total = element_size;
  for (const int64_t dim : shape) {
    if (dim < 0) return -1;
    if (dim != 0 && total > std::numeric_limits<int64_t>::max() / dim) return -1;
    total *= dim;
  }
  return total;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

Json shape_json(const std::vector<int64_t>& shape) {
  Json out = Json::array();
  for (const int64_t dim : shape) out.push_back(dim);
  return out;
}

// The header's "__metadata__" object: string values only, as the reference requires.
std::map<std::string, std::string> parse_metadata(const Json& value, const std::string& where) {
  check(value.is_object(), where, "\"__metadata__\" must be an object, got ",
        Json::type_name(value.type()));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, entry] : value.as_object()) {
    check(entry.is_string(), where, "\"__metadata__\" entry \"", key, "\" must be a string, got ",
          Json::type_name(entry.type()));
    metadata.emplace(key, entry.as_string());
  }
  return metadata;
}

int64_t non_negative_integer(const Json& value, const std::string& where, const std::string& tensor,
                             const char* field) {
  if (!value.is_integer() || value.as_int64() < 0) {
    fail(where, "tensor \"", tensor, "\": ", field, " must hold non-negative integers, got ",
         value.dump());
  }
  return value.as_int64();
}

struct Entry {
  TensorRecord record;
  int64_t begin = 0;
  int64_t end = 0;
};

Entry parse_entry(const std::string& name, const Json& value, const std::string& where) {
  check(value.is_object(), where, "tensor \"", name, "\" must be an object, got ",
        Json::type_name(value.type()));
  for (const auto& [key, field] : value.as_object()) {
    (void)field;
    check(key == "dtype" || key == "shape" || key == "data_offsets", where, "tensor \"", name,
          "\" has an unknown field \"", key, "\"");
  }
  const Json* dtype = value.find("dtype");
  const Json* shape = value.find("shape");
  const Json* offsets = value.find("data_offsets");
  check(dtype && shape && offsets, where, "tensor \"", name,
        "\" needs \"dtype\", \"shape\" and \"data_offsets\"");

  Entry entry;
  entry.record.name = name;
  check(dtype->is_string(), where, "tensor \"", name, "\": dtype must be a string");
  entry.record.dtype = dtype->as_string();
  check(dtype_rank(entry.record.dtype) >= 0, where, "tensor \"", name, "\": unknown dtype \"",
        entry.record.dtype, "\"");

  check(shape->is_array(), where, "tensor \"", name, "\": shape must be an array");
  for (const Json& dim : shape->as_array()) {
    entry.record.shape.push_back(non_negative_integer(dim, where, name, "shape"));
  }

  check(offsets->is_array() && offsets->size() == 2, where, "tensor \"", name,
        "\": data_offsets must be [begin, end]");
  entry.begin = non_negative_integer(offsets->at(size_t{0}), where, name, "data_offsets");
  entry.end = non_negative_integer(offsets->at(size_t{1}), where, name, "data_offsets");
  check(entry.begin <= entry.end, where, "tensor \"", name, "\": data_offsets [", entry.begin, ", ",
        entry.end, "] end before they begin");

  const int64_t expected =
      byte_size(entry.record.shape, safetensors_dtype_size(entry.record.dtype));
  // (if + fail rather than check(): shape_text would be built even for good tensors.)
  if (expected < 0) {
    fail(where, "tensor \"", name, "\": shape ", shape_text(entry.record.shape), " overflows");
  }
  if (expected != entry.end - entry.begin) {
    fail(where, "tensor \"", name, "\": ", entry.record.dtype, " ", shape_text(entry.record.shape),
         " needs ", expected, " bytes but data_offsets [", entry.begin, ", ", entry.end, "] span ",
         entry.end - entry.begin);
  }
  return entry;
}

// Where a file's bytes come from: a buffer, or the file itself read piece by piece so that a
// checkpoint is never held twice in memory while loading.
struct ByteSource {
  uint64_t size = 0;
  std::function<void(uint64_t offset, size_t count, uint8_t* out)> read;
};

// Validates everything before copying any tensor data.
SafetensorsFile parse(const ByteSource& source, const std::string& where) {
  check(source.size >= 8, where, "truncated: ", source.size,
        " bytes, shorter than the 8-byte header length");
  uint8_t length_bytes[8];
  source.read(0, 8, length_bytes);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length_bytes[i];
  check(header_size <= kMaxHeaderSize, where, "header length ", header_size,
        " is beyond the limit of ", kMaxHeaderSize, " bytes");
  check(header_size <= source.size - 8, where, "header length ", header_size,
        " is beyond the file size of ", source.size, " bytes");
  std::string header_text(static_cast<size_t>(header_size), '\0');
  source.read(8, header_text.size(), reinterpret_cast<uint8_t*>(header_text.data()));
  check(!header_text.empty() && header_text.front() == '{', where,
        "the header does not start with '{'");

  Json header;
  try {
    header = Json::parse(header_text);
  } catch (const Error& e) {
    fail(where, "invalid header: ", e.what());
  }
  check(header.is_object(), where, "the header is not a JSON object");

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.as_object()) {
    if (name == "__metadata__") {
      file.metadata = parse_metadata(value, where);
    } else {
      entries.push_back(parse_entry(name, value, where));
    }
  }

  // The data section must be covered exactly: sorted by offsets, each tensor starts where the
  // previous one ended, and the last one ends at the end of the file.
  const uint64_t data_start = 8 + header_size;
  const int64_t data_size = static_cast<int64_t>(source.size - data_start);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  int64_t covered = 0;
  for (const Entry& entry : entries) {
    check(entry.end <= data_size, where, "tensor \"", entry.record.name, "\": data_offsets [",
          entry.begin, ", ", entry.end, "] are beyond the data section of ", data_size,
          " bytes (truncated file?)");
    check(entry.begin >= covered, where, "tensor \"", entry.record.name, "\": data_offsets [",
          entry.begin, ", ", entry.end, "] overlap the previous tensor, which ends at ", covered);
    check(entry.begin == covered, where, "tensor \"", entry.record.name, "\": data_offsets [",
          entry.begin, ", ", entry.end, "] leave a gap after byte ", covered);
    covered = entry.end;
  }
  check(covered == data_size, where, "the tensors cover ", covered, " bytes of a data section of ",
        data_size, " bytes (trailing bytes)");

  for (Entry& entry : entries) {
    entry.record.bytes.resize(static_cast<size_t>(entry.end - entry.begin));
    source.read(data_start + static_cast<uint64_t>(entry.begin), entry.record.bytes.size(),
                entry.record.bytes.data());
    file.tensors.push_back(std::move(entry.record));
  }
  std::sort(file.tensors.begin(), file.tensors.end(),
            [](const TensorRecord& a, const TensorRecord& b) { return a.name < b.name; });
  return file;
}

}  // namespace

int64_t safetensors_dtype_size(const std::string& dtype) {
  const int rank = dtype_rank(dtype);
  check(rank >= 0, "safetensors: unknown or unsupported dtype \"", dtype, "\"");
  return kDtypes[static_cast<size_t>(rank)].size;
}

const TensorRecord* SafetensorsFile::find(const std::string& name) const {
  for (const TensorRecord& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

const TensorRecord& SafetensorsFile::at(const std::string& name) const {
  if (const TensorRecord* tensor = find(name)) return *tensor;
  std::string names;
  for (const TensorRecord& tensor : tensors) names += (names.empty() ? "" : ", ") + tensor.name;
  fail("safetensors: no tensor \"", name, "\" (the file holds: ", names, ")");
}

namespace {

// What goes in front of the data: the 8-byte length and the padded header, plus the order the
// tensors' bytes follow in. `context` starts every error message (the function, and the file).
struct Layout {
  std::string prefix;
  std::vector<const TensorRecord*> order;
  uint64_t data_size = 0;
};

Layout plan_layout(const std::vector<TensorRecord>& tensors,
                   const std::map<std::string, std::string>& metadata, const std::string& context) {
  std::set<std::string> names;
  for (const TensorRecord& tensor : tensors) {
    const std::string where = context + "tensor \"" + tensor.name + "\": ";
    check(!tensor.name.empty(), context, "a tensor has an empty name");
    check(tensor.name != "__metadata__", where, "the name is reserved for the metadata");
    check(names.insert(tensor.name).second, where, "duplicate name");
    check(dtype_rank(tensor.dtype) >= 0, where, "unknown or unsupported dtype \"", tensor.dtype,
          "\"");
    const int64_t expected = byte_size(tensor.shape, safetensors_dtype_size(tensor.dtype));
    if (expected < 0) fail(where, "invalid shape ", shape_text(tensor.shape));
    if (static_cast<uint64_t>(expected) != tensor.bytes.size()) {
      fail(where, tensor.dtype, " ", shape_text(tensor.shape), " needs ", expected, " bytes, got ",
           tensor.bytes.size());
    }
  }

  // The reference's layout: larger dtypes first (keeps every tensor aligned), then by name.
  Layout layout;
  for (const TensorRecord& tensor : tensors) layout.order.push_back(&tensor);
  std::sort(layout.order.begin(), layout.order.end(),
            [](const TensorRecord* a, const TensorRecord* b) {
              const int rank_a = dtype_rank(a->dtype), rank_b = dtype_rank(b->dtype);
              if (rank_a != rank_b) return rank_a > rank_b;
              return a->name < b->name;
            });

  // Members are appended directly (names are already known to be unique): Json::set would
  // rescan the object for every tensor.
  Json header = Json::object();
  Json::Object& members = header.as_object();
  if (!metadata.empty()) {
    Json entries = Json::object();
    for (const auto& [key, value] : metadata) entries.as_object().emplace_back(key, value);
    members.emplace_back("__metadata__", std::move(entries));
  }
  int64_t offset = 0;
  for (const TensorRecord* tensor : layout.order) {
    const int64_t size = static_cast<int64_t>(tensor->bytes.size());
    Json entry = Json::object();
    entry.set("dtype", tensor->dtype);
    entry.set("shape", shape_json(tensor->shape));
    entry.set("data_offsets", Json(Json::Array{offset, offset + size}));
    members.emplace_back(tensor->name, std::move(entry));
    offset += size;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  const uint64_t length = header_text.size();
  for (int i = 0; i < 8; ++i) layout.prefix += static_cast<char>((length >> (8 * i)) & 0xFF);
  layout.prefix += header_text;
  layout.data_size = static_cast<uint64_t>(offset);
  return layout;
}

}  // namespace

std::vector<uint8_t> serialize_safetensors(const std::vector<TensorRecord>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  const Layout layout = plan_layout(tensors, metadata, "serialize_safetensors: ");
  std::vector<uint8_t> content(layout.prefix.begin(), layout.prefix.end());
  content.reserve(layout.prefix.size() + layout.data_size);
  for (const TensorRecord* tensor : layout.order) {
    content.insert(content.end(), tensor->bytes.begin(), tensor->bytes.end());
  }
  return content;
}

void save_safetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const Layout layout = plan_layout(tensors, metadata, "save_safetensors('" + path + "'): ");
  // Streamed: a checkpoint is never held twice in memory.
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(layout.prefix.data(), static_cast<std::streamsize>(layout.prefix.size()));
    for (const TensorRecord* tensor : layout.order) {
      out.write(reinterpret_cast<const char*>(tensor->bytes.data()),
                static_cast<std::streamsize>(tensor->bytes.size()));
    }
  });
}

SafetensorsFile parse_safetensors(const std::vector<uint8_t>& content, const std::string& what) {
  ByteSource source;
  source.size = content.size();
  source.read = [&](uint64_t offset, size_t count, uint8_t* out) {
    std::copy_n(content.data() + offset, count, out);
  };
  return parse(source, "safetensors '" + what + "': ");
}

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string where = "safetensors '" + path + "': ";
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  check(status.type() != std::filesystem::file_type::not_found, where,
        "cannot open the file: it does not exist");
  check(status.type() != std::filesystem::file_type::directory, where,
        "is a folder, not a checkpoint file (a run folder holds best.safetensors and "
        "last.safetensors: give one of them)");
  check(status.type() == std::filesystem::file_type::regular, where,
        "is not a regular file (a device, pipe or socket); give a .safetensors file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  check(in.good(), where, "cannot open the file: ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  check(size >= 0, where, "cannot determine the file size");
  ByteSource source;
  source.size = static_cast<uint64_t>(size);
  source.read = [&](uint64_t offset, size_t count, uint8_t* out) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(count));
    check(in.good() && static_cast<size_t>(in.gcount()) == count, where, "read of ", count,
          " bytes at offset ", offset, " failed (file changed while loading?)");
  };
  return parse(source, where);
}

}  // namespace mixlab
