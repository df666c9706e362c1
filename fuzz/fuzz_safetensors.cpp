// safetensors parsing (train/safetensors.h): any byte string is parsed or refused with Error;
// what parses serialises again to bytes that parse to the same tensors.
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixlab;
  const std::vector<uint8_t> bytes(data, data + size);
  SafetensorsFile file;
  try {
    file = parse_safetensors(bytes, "fuzz input");
  } catch (const Error&) {
    return 0;
  }
  const SafetensorsFile again =
      parse_safetensors(serialize_safetensors(file.tensors, file.metadata), "round trip");
  if (again.tensors.size() != file.tensors.size() || again.metadata != file.metadata) std::abort();
  return 0;
}
