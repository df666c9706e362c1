// The safetensors file format (https://github.com/huggingface/safetensors), independent of the
// engine's Tensor type so that checkpoints, tests and tools can share it:
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   JSON header: {"__metadata__": {str: str}, "<name>": {"dtype": "F32",
//             "shape": [2, 3], "data_offsets": [begin, end]}, ...}, padded with spaces to a
//             multiple of 8 so that the data section starts 8-byte aligned
//   the rest  raw little-endian, row-major tensor data; offsets are relative to its start
//
// Writing follows the reference serializer byte for byte: tensors are laid out (and listed in
// the header) by descending dtype rank, then by name, so every tensor starts aligned to its
// element size; with a single dtype that is plain name order. "__metadata__" comes first and is
// omitted when empty. The file is written atomically (io/atomic_file.h).
//
// Loading checks everything and refuses a bad file whole, with an Error naming the file:
// header length beyond the file, invalid JSON or UTF-8, unknown dtype, bad shapes or offsets,
// size mismatches, gaps, overlaps, trailing or missing bytes, duplicate names, unknown fields.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mixlab {

struct TensorRecord {
  std::string name;
  std::string dtype;           // "F32", "F64", "I32", "I64", "U8", "BF16", "F16", ... (see below)
  std::vector<int64_t> shape;  // empty = a scalar (one element)
  std::vector<uint8_t>
      bytes;  // little-endian, row-major; size = elements * safetensors_dtype_size(dtype)
};

struct SafetensorsFile {
  std::vector<TensorRecord> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;

  // The tensor of that name, or Error listing what the file holds.
  const TensorRecord& at(const std::string& name) const;
  const TensorRecord* find(const std::string& name) const;
};

// Bytes per element of a safetensors dtype: BOOL U8 I8 F8_E5M2 F8_E4M3 F8_E8M0 (1), I16 U16
// F16 BF16 (2), I32 U32 F32 (4), F64 I64 U64 C64 (8). Throws Error for anything else (the
// sub-byte F4/F6 types are not supported).
int64_t safetensors_dtype_size(const std::string& dtype);

// Writes the file atomically, streaming the tensors' bytes; throws Error (leaving any old file
// intact) on invalid records: unknown dtype, negative dimension, bytes that do not match shape x
// dtype, empty or duplicate names, or the reserved name "__metadata__".
void save_safetensors(const std::string& path, const std::vector<TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Every tensor of the file in memory. The header and offsets are validated before any tensor
// data is read, and the data is read tensor by tensor (never the whole file at once on top).
SafetensorsFile load_safetensors(const std::string& path);

// The same two steps on a byte buffer (the file's content); `what` names it in errors.
std::vector<uint8_t> serialize_safetensors(const std::vector<TensorRecord>& tensors,
                                           const std::map<std::string, std::string>& metadata);
SafetensorsFile parse_safetensors(const std::vector<uint8_t>& content, const std::string& what);

}  // namespace mixlab
