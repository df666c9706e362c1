// Small string helpers shared by the error messages and the apps.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mixlab {

// "a, b, c" (or the items with another separator between them).
inline std::string join(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

}  // namespace mixlab
