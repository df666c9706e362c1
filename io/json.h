// A small JSON value over nlohmann-json's parser: enough for safetensors headers, checkpoint
// manifests and config files. nlohmann (the C++ ecosystem's standard) does the grammar, escapes
// and UTF-8; this value type is what the rest of mixlab reads and writes.
//
// Choices:
//  - Objects keep their members in document (insertion) order, so a file written back out keeps
//    the order a person wrote it in; lookup is a linear scan, fine for headers and configs.
//  - Numbers keep an exact int64 when written as an integer literal that fits (offsets and
//    shapes must not go through double); everything else is a double. `as_int64()` accepts
//    only such integers, so "2.0" or "1e3" is refused where an integer is required.
//  - The parser follows RFC 8259 strictly: no comments, trailing commas, leading zeros, NaN,
//    single quotes or unescaped control characters; strings must be valid UTF-8 and \u escapes
//    must pair surrogates correctly (all checked by nlohmann). On top of nlohmann: duplicate keys
//    in one object are an error (they are ambiguous, and a safetensors header with two entries
//    of one name is corrupt); numbers a double cannot hold (1e400, 1e-400) are refused rather
//    than turned into inf or 0; nesting is limited to 256 levels. Errors give line, column and
//    byte offset.
//  - The serializer writes compact JSON (no spaces), non-ASCII as raw UTF-8, numbers in their
//    shortest round-trip form (1.0 as "1"), and refuses NaN, infinities and invalid UTF-8 so
//    that everything it writes parses again.
#pragma once
#include <concepts>
#include <type_traits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace mixlab {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool value) : type_(Type::Bool), bool_(value) {}
  Json(double value) : type_(Type::Number), number_(value) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Json(T value) { set_integer(value); }
  Json(const char* value) : type_(Type::String), string_(value) {}
  Json(const void*) = delete;  // other pointers would silently become bools
  Json(std::string value) : type_(Type::String), string_(std::move(value)) {}
  Json(std::string_view value) : type_(Type::String), string_(value) {}
  Json(Array value) : type_(Type::Array), array_(std::move(value)) {}
  Json(Object value) : type_(Type::Object), object_(std::move(value)) {}
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  // Parses one JSON text (surrounding whitespace allowed, nothing else); throws Error.
  static Json parse(std::string_view text);
  // Compact serialization; throws Error for NaN, infinities or strings that are not UTF-8.
  std::string dump() const;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  // A number held as an exact int64 (an integer literal, or built from an integer).
  bool is_integer() const { return type_ == Type::Number && is_integer_; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Typed access; each throws Error naming the expected and the actual type.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int64() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object helpers. find returns nullptr when the key is absent; at throws Error naming it.
  const Json* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const Json& at(std::string_view key) const;
  // Replaces the member's value in place, or appends a new member at the end.
  void set(std::string key, Json value);

  // Array helpers.
  const Json& at(size_t index) const;
  void push_back(Json value);

  // Elements of an array or members of an object; throws for other types.
  size_t size() const;

  // Structural equality; numbers compare by value (Json(3) == Json(3.0)), objects by their
  // members in order.
  friend bool operator==(const Json& a, const Json& b);

  static const char* type_name(Type type);

 private:
  template <std::integral T>
  void set_integer(T value);

  Type type_ = Type::Null;
  bool bool_ = false;
  bool is_integer_ = false;
  int64_t integer_ = 0;
  double number_ = 0.0;
  std::string string_;
  Array array_;
  Object object_;
};

template <std::integral T>
void Json::set_integer(T value) {
  if constexpr (std::is_unsigned_v<T>) {
    check(static_cast<uint64_t>(value) <= static_cast<uint64_t>(INT64_MAX), "json: integer ", value,
          " does not fit in int64");
  }
  type_ = Type::Number;
  is_integer_ = true;
  integer_ = static_cast<int64_t>(value);
  number_ = static_cast<double>(value);
}

}  // namespace mixlab
