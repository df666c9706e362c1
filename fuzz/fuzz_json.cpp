// The JSON reader (train/json.h): any text is parsed or refused with Error; what parses dumps
// to text that parses again (not necessarily to the same text: "-0" reads back as the integer 0).
#include <string_view>

#include "core/error.h"
#include "io/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixlab;
  Json value;
  try {
    value = Json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error&) {
    return 0;
  }
  Json::parse(value.dump());  // an Error here escapes: the reader refused the writer's output
  return 0;
}
