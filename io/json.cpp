#include "io/json.h"

#include <charconv>
#include <cmath>
#include <system_error>
#include <unordered_set>

namespace mixlab {

namespace {

// Deep enough for any config, shallow enough that hostile input cannot overflow the stack.
constexpr int kMaxDepth = 256;

// Length of the valid UTF-8 sequence starting at text[pos], or 0 when it is invalid (overlong
// forms, surrogates and code points above U+10FFFF are invalid, as RFC 3629 says).
size_t utf8_sequence_length(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    const unsigned char next = byte(pos + i);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  if (length == 3 && (code < 0x800 || (code >= 0xD800 && code <= 0xDFFF))) return 0;
  if (length == 4 && (code < 0x10000 || code > 0x10FFFF)) return 0;
  return length;
}

void append_utf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

void dump_string(const std::string& value, std::string& out) {
  static const char* const kHex = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x80) {
      const size_t length = utf8_sequence_length(value, i);
      check(length > 0, "json: cannot serialize a string that is not valid UTF-8 (byte ", i,
            " of a ", value.size(), "-byte string)");
      out.append(value, i, length);
      i += length;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

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

// Recursive descent over the RFC 8259 grammar; every error names where it happened.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Json parse_document() {
    skip_whitespace();
    Json value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) error("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void error(const std::string& what) const { error_at(what, pos_); }

  [[noreturn]] void error_at(const std::string& what, size_t at) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    fail("json: ", what, " at line ", line, ", column ", column, " (byte ", at, ")");
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  void expect_literal(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) error("invalid literal");
    pos_ += literal.size();
  }

  Json parse_value(int depth) {
    if (at_end()) error("unexpected end of input, expected a value");
    switch (peek()) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"':
        return Json(parse_string());
      case 't':
        expect_literal("true");
        return Json(true);
      case 'f':
        expect_literal("false");
        return Json(false);
      case 'n':
        expect_literal("null");
        return Json();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        error(std::string("unexpected character '") + describe(peek()) + "', expected a value");
    }
  }

  static std::string describe(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return std::string(1, c);
    static const char* const kHex = "0123456789abcdef";
    return std::string("\\x") + kHex[u >> 4] + kHex[u & 0xF];
  }

  void check_depth(int depth) {
    if (depth > kMaxDepth) error("nesting deeper than " + std::to_string(kMaxDepth));
  }

  Json parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Json result = Json::object();
    std::unordered_set<std::string> keys;
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return result;
    }
    while (true) {
      skip_whitespace();
      if (at_end() || peek() != '"') error("expected a string key");
      const size_t key_pos = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) error_at("duplicate key \"" + key + "\"", key_pos);
      skip_whitespace();
      if (at_end() || peek() != ':') error("expected ':' after an object key");
      ++pos_;
      skip_whitespace();
      Json value = parse_value(depth);
      result.object_.emplace_back(std::move(key), std::move(value));
      skip_whitespace();
      if (at_end()) error("unexpected end of input inside an object");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return result;
      }
      error("expected ',' or '}' in an object");
    }
  }

  Json parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Json result = Json::array();
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return result;
    }
    while (true) {
      skip_whitespace();
      result.array_.push_back(parse_value(depth));
      skip_whitespace();
      if (at_end()) error("unexpected end of input inside an array");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return result;
      }
      error("expected ',' or ']' in an array");
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) error("truncated \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_ + i];
      uint32_t digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        error_at("invalid hex digit in \\u escape", pos_ + i);
      }
      code = code * 16 + digit;
    }
    pos_ += 4;
    return code;
  }

  std::string parse_string() {
    const size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) error_at("unterminated string", start);
      const unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) error("unescaped control character in a string");
      if (c >= 0x80) {
        const size_t length = utf8_sequence_length(text_, pos_);
        if (length == 0) error("invalid UTF-8 in a string");
        out.append(text_.substr(pos_, length));
        pos_ += length;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      const size_t escape_pos = pos_;
      ++pos_;
      if (at_end()) error_at("unterminated escape", escape_pos);
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t code = parse_hex4();
          if (code >= 0xDC00 && code <= 0xDFFF) {
            error_at("unpaired low surrogate in \\u escape", escape_pos);
          }
          if (code >= 0xD800 && code <= 0xDBFF) {
            // A high surrogate must be followed at once by an escaped low surrogate.
            if (text_.substr(pos_, 2) != "\\u") {
              error_at("unpaired high surrogate in \\u escape", escape_pos);
            }
            pos_ += 2;
            const uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) {
              error_at("high surrogate not followed by a low surrogate", escape_pos);
            }
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          error_at(std::string("invalid escape '\\") + describe(e) + "'", escape_pos);
      }
    }
  }

  Json parse_number() {
    const size_t start = pos_;
    const auto is_digit = [&] { return !at_end() && peek() >= '0' && peek() <= '9'; };
    if (peek() == '-') ++pos_;
    if (!is_digit()) error("expected a digit");
    if (peek() == '0') {
      ++pos_;
      if (is_digit()) error_at("leading zeros are not allowed", start);
    } else {
      while (is_digit()) ++pos_;
    }
    bool integral = true;
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      if (!is_digit()) error("expected a digit after the decimal point");
      while (is_digit()) ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!is_digit()) error("expected a digit in the exponent");
      while (is_digit()) ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      int64_t value = 0;
      const auto [ptr, ec] = std::from_chars(first, last, value);
      if (ec == std::errc() && ptr == last) return Json(value);
      // Too large for int64: falls through to a (rounded) double.
    }
    double value = 0.0;
    const auto [ptr, ec] = std::from_chars(first, last, value);
    // Numbers beyond a double's range (1e400, 1e-400) are refused rather than silently
    // turned into infinity or zero.
    if (ec == std::errc::result_out_of_range) error_at("number out of range for a double", start);
    if (ec != std::errc() || ptr != last) error_at("invalid number", start);
    return Json(value);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Json Json::parse(std::string_view text) { return JsonParser(text).parse_document(); }

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
