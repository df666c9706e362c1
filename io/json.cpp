#include "io/json.h"

#include <charconv>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <system_error>
#include <unordered_set>

namespace mixlab {

namespace {

// Deep enough for any config, shallow enough that hostile input cannot exhaust memory building
// it (nlohmann's parser itself is not recursive, but our Json value is).
constexpr int kMaxDepth = 256;

// "line L, column C (byte B)" of a byte offset, for errors.
std::string where(std::string_view text, size_t at) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + " (byte " +
         std::to_string(at) + ")";
}

// nlohmann quotes the input it choked on; bytes that are not printable ASCII become \xNN so the
// message itself stays valid UTF-8 text.
std::string printable(std::string_view text) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      out += std::string("\\x") + kHex[u >> 4] + kHex[u & 0xF];
    }
  }
  return out;
}

// A pointer over the text that records the last character nlohmann's lexer read, so that what
// nlohmann does not check (duplicate keys, depth, numbers out of range) can still say where.
class TrackedInput {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedInput(const char* at, const char** last_read) : at_(at), last_read_(last_read) {}
  reference operator*() const {
    *last_read_ = at_;
    return *at_;
  }
  TrackedInput& operator++() {
    ++at_;
    return *this;
  }
  TrackedInput operator++(int) {
    TrackedInput before = *this;
    ++at_;
    return before;
  }
  bool operator==(const TrackedInput& other) const { return at_ == other.at_; }

 private:
  const char* at_;
  const char** last_read_;
};

// nlohmann's parser does the RFC 8259 grammar, escapes, surrogate pairs and UTF-8 validation and
// reports each value here (SAX); this handler builds our Json and adds the rules nlohmann lacks:
// no duplicate keys, bounded depth, exact int64 integers, no numbers beyond a double's range.
class JsonBuilder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit JsonBuilder(std::string_view text) : text_(text) {}

  Json parse() {
    // nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0junk" would pass; no
    // JSON text contains a raw NUL (in strings it must be escaped as \u0000).
    if (const size_t nul = text_.find('\0'); nul != std::string_view::npos) {
      error_at("unexpected NUL byte", nul);
    }
    const char* begin = text_.data();
    const char* end = begin + text_.size();
    nlohmann::json::sax_parse(TrackedInput(begin, &last_read_), TrackedInput(end, &last_read_),
                              this, nlohmann::json::input_format_t::json, /*strict=*/true,
                              /*ignore_comments=*/false);
    return std::move(root_);
  }

  bool null() override { return add(Json()); }
  bool boolean(bool value) override { return add(Json(value)); }
  bool number_integer(number_integer_t value) override { return add(Json(value)); }
  bool number_unsigned(number_unsigned_t value) override {
    // Beyond int64: a (rounded) double, like any other number that is not an exact int64.
    if (value > static_cast<uint64_t>(INT64_MAX)) return add(Json(static_cast<double>(value)));
    return add(Json(static_cast<int64_t>(value)));
  }
  bool number_float(number_float_t, const string_t& literal) override {
    // Read the literal again: from_chars says when it is beyond a double's range (1e400,
    // 1e-400), which is refused rather than silently turned into infinity or zero.
    double value = 0.0;
    const auto [ptr, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), value);
    if (ec == std::errc::result_out_of_range) {
      error_at("number out of range for a double", number_start(literal));
    }
    if (ec != std::errc() || ptr != literal.data() + literal.size()) {
      error_at("invalid number", number_start(literal));
    }
    return add(Json(value));
  }
  bool string(string_t& value) override { return add(Json(std::move(value))); }
  bool binary(binary_t&) override { return false; }  // JSON text has no binary values

  bool start_object(size_t) override { return open(Json::object()); }
  bool key(string_t& key) override {
    if (!keys_.back().insert(key).second) error_at("duplicate key \"" + key + "\"", key_start());
    key_ = std::move(key);
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }
  bool start_array(size_t) override { return open(Json::array()); }
  bool end_array() override {
    open_.pop_back();
    return true;
  }

  bool parse_error(size_t position, const std::string&,
                   const nlohmann::detail::exception& error) override {
    // nlohmann says "[json.exception.parse_error.101] parse error at line 1, column 4: <what>"
    // (or "[json.exception.out_of_range.406] <what>"); keep <what> and give the position in this
    // file's own words. `position` counts the characters read, including the offending one.
    std::string_view what = error.what();
    if (const size_t bracket = what.find("] "); bracket != std::string_view::npos) {
      what.remove_prefix(bracket + 2);
    }
    if (what.starts_with("parse error")) {
      if (const size_t colon = what.find(": "); colon != std::string_view::npos) {
        what.remove_prefix(colon + 2);
      }
    }
    // nlohmann calls bad UTF-8 "ill-formed"; keep the words mixlab's messages have always used.
    const std::string reason = what.find("UTF-8") != std::string_view::npos
                                   ? "invalid UTF-8 in a string"
                                   : printable(what);
    error_at(reason, position > 0 ? position - 1 : 0);
  }

 private:
  [[noreturn]] void error_at(const std::string& what, size_t at) const {
    fail("json: ", what, " at ", where(text_, std::min(at, text_.size())));
  }

  size_t last_read() const {
    return last_read_ ? static_cast<size_t>(last_read_ - text_.data()) : 0;
  }

  // The key's closing quote is the last character read; its opening quote is the nearest one
  // before it that is not escaped (preceded by an even number of backslashes).
  size_t key_start() const {
    size_t at = last_read();
    while (at > 0) {
      --at;
      if (text_[at] != '"') continue;
      size_t backslashes = 0;
      while (backslashes < at && text_[at - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return at;
    }
    return at;
  }

  // The lexer has read either the number's last character (at the end of the text) or the one
  // after it, which cannot end a number literal.
  size_t number_start(const std::string& literal) const {
    size_t end = std::min(last_read() + 1, text_.size());
    if (end < literal.size() || text_.substr(end - literal.size(), literal.size()) != literal) {
      --end;
    }
    return end >= literal.size() ? end - literal.size() : 0;
  }

  // Puts a value where the document is: the root, the open array, or the open object's key.
  Json* place(Json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.as_array().back();
    }
    parent.as_object().emplace_back(std::move(key_), std::move(value));
    return &parent.as_object().back().second;
  }

  bool add(Json value) {
    place(std::move(value));
    return true;
  }

  bool open(Json container) {
    if (open_.size() >= static_cast<size_t>(kMaxDepth)) {
      error_at("nesting deeper than " + std::to_string(kMaxDepth), last_read());
    }
    const bool is_object = container.is_object();
    // Children go into the innermost container only, so pointers to the outer ones stay valid.
    open_.push_back(place(std::move(container)));
    if (is_object) keys_.emplace_back();
    return true;
  }

  std::string_view text_;
  const char* last_read_ = nullptr;
  Json root_;
  std::vector<Json*> open_;                            // innermost last
  std::vector<std::unordered_set<std::string>> keys_;  // keys seen, per open object
  std::string key_;                                    // the key of the next object member
};

// Strings go through nlohmann's serializer: it escapes what JSON requires (quote, backslash,
// control characters as \u00xx) and refuses invalid UTF-8.
void dump_string(const std::string& value, std::string& out) {
  try {
    out += nlohmann::json(value).dump();
  } catch (const nlohmann::json::type_error& error) {
    const std::string_view message = error.what();
    const size_t bracket = message.find("] ");
    fail("json: cannot serialize a string that is not valid UTF-8 (",
         bracket == std::string_view::npos ? message : message.substr(bracket + 2), ")");
  }
}

// The structure is written here rather than by nlohmann because numbers must keep their
// shortest form: nlohmann prints the double 1.0 as "1.0" where to_chars (and every file mixlab
// has written so far) says "1", and checkpoints must stay byte-identical.
void dump_value(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::Type::Null:
      out += "null";
      return;
    case Json::Type::Bool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Json::Type::Number: {
      char buffer[64];
      std::to_chars_result result;
      if (value.is_integer()) {
        result = std::to_chars(buffer, buffer + sizeof buffer, value.as_int64());
      } else {
        const double number = value.as_double();
        check(std::isfinite(number), "json: cannot serialize ", number,
              " (JSON has no NaN or infinity)");
        // Shortest form that reads back to the same double.
        result = std::to_chars(buffer, buffer + sizeof buffer, number);
      }
      out.append(buffer, result.ptr);
      return;
    }
    case Json::Type::String:
      dump_string(value.as_string(), out);
      return;
    case Json::Type::Array: {
      out += '[';
      bool first = true;
      for (const Json& element : value.as_array()) {
        if (!first) out += ',';
        first = false;
        dump_value(element, out);
      }
      out += ']';
      return;
    }
    case Json::Type::Object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.as_object()) {
        if (!first) out += ',';
        first = false;
        dump_string(key, out);
        out += ':';
        dump_value(member, out);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

Json Json::parse(std::string_view text) { return JsonBuilder(text).parse(); }

std::string Json::dump() const {
  std::string out;
  dump_value(*this, out);
  return out;
}

const char* Json::type_name(Type type) {
  switch (type) {
    case Type::Null:
      return "null";
    case Type::Bool:
      return "bool";
    case Type::Number:
      return "number";
    case Type::String:
      return "string";
    case Type::Array:
      return "array";
    case Type::Object:
      return "object";
  }
  return "?";
}

bool Json::as_bool() const {
  check(is_bool(), "json: expected a bool, got ", type_name(type_));
  return bool_;
}

double Json::as_double() const {
  check(is_number(), "json: expected a number, got ", type_name(type_));
  return number_;
}

int64_t Json::as_int64() const {
  check(is_number(), "json: expected an integer, got ", type_name(type_));
  // (Not check(): its message arguments are evaluated even when the check passes.)
  if (!is_integer_) fail("json: expected an integer, got ", dump());
  return integer_;
}

const std::string& Json::as_string() const {
  check(is_string(), "json: expected a string, got ", type_name(type_));
  return string_;
}

const Json::Array& Json::as_array() const {
  check(is_array(), "json: expected an array, got ", type_name(type_));
  return array_;
}

Json::Array& Json::as_array() {
  check(is_array(), "json: expected an array, got ", type_name(type_));
  return array_;
}

const Json::Object& Json::as_object() const {
  check(is_object(), "json: expected an object, got ", type_name(type_));
  return object_;
}

Json::Object& Json::as_object() {
  check(is_object(), "json: expected an object, got ", type_name(type_));
  return object_;
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [name, value] : as_object()) {
    if (name == key) return &value;
  }
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* value = find(key);
  check(value != nullptr, "json: missing key \"", key, "\"");
  return *value;
}

void Json::set(std::string key, Json value) {
  for (auto& [name, member] : as_object()) {
    if (name == key) {
      member = std::move(value);
      return;
    }
  }
  object_.emplace_back(std::move(key), std::move(value));
}

const Json& Json::at(size_t index) const {
  const Array& elements = as_array();
  check(index < elements.size(), "json: index ", index, " out of range for an array of ",
        elements.size());
  return elements[index];
}

void Json::push_back(Json value) { as_array().push_back(std::move(value)); }

size_t Json::size() const {
  if (is_array()) return array_.size();
  check(is_object(), "json: size() of a ", type_name(type_), " (only arrays and objects)");
  return object_.size();
}

bool operator==(const Json& a, const Json& b) {
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case Json::Type::Null:
      return true;
    case Json::Type::Bool:
      return a.bool_ == b.bool_;
    case Json::Type::Number:
      if (a.is_integer_ && b.is_integer_) return a.integer_ == b.integer_;
      return a.number_ == b.number_;
    case Json::Type::String:
      return a.string_ == b.string_;
    case Json::Type::Array:
      return a.array_ == b.array_;
    case Json::Type::Object:
      return a.object_ == b.object_;
  }
  return false;
}

}  // namespace mixlab
