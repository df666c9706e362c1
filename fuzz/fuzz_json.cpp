// The JSON reader (train/json.h): any text is parsed or refused with Error; what parses dumps
// to text that parses to the same dump.
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "train/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixlab;
  Json value;
  try {
    value = Json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error&) {
    return 0;
  }
  const std::string text = value.dump();
  if (Json::parse(text).dump() != text) std::abort();
  return 0;
}
