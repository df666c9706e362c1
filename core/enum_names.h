// Closed sets of choices (a model's task, its pooling, an optimizer, a schedule) are enum
// classes in the code and stay names in files and on the command line, so checkpoints and
// config.ini read the same words a person types. Each enum lists its names once, in a table of
// EnumName, and its to_string / parse_X pair is one line each over these two helpers.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.h"

namespace mixlab {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value`; a value missing from the table is a programming error.
template <typename E, std::size_t N>
std::string enum_to_string(const EnumName<E> (&table)[N], E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  fail("enum value ", static_cast<long long>(value), " has no name");
}

// The value named `text`; anything else is an Error naming the field, the value and every
// valid name: "optimizer 'adamx' is not one of: adamw, adam, sgd".
template <typename E, std::size_t N>
E enum_parse(const EnumName<E> (&table)[N], std::string_view field, std::string_view text) {
  std::string valid;
  for (const auto& entry : table) {
    if (text == entry.name) return entry.value;
    valid += (valid.empty() ? "" : ", ") + std::string(entry.name);
  }
  fail(field, " '", text, "' is not one of: ", valid);
}

}  // namespace mixlab
