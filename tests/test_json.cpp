// The JSON value, strict parser and compact serializer (io/json.h).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/json.h"

using mixlab::Error;
using mixlab::Json;

namespace {

// The message of the Error that parsing `text` throws ("" if it parses).
std::string parse_error(const std::string& text) {
  try {
    Json::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("json: parses every value type") {
  const Json value = Json::parse(
      R"( {"null": null, "t": true, "f": false, "int": -42, "big": 9007199254740993,
           "real": 2.5e-3, "s": "hi", "a": [1, [2, {}], []], "o": {"k": "v"}} )");
  REQUIRE(value.is_object());
  CHECK(value.size() == 9);
  CHECK(value.at("null").is_null());
  CHECK(value.at("t").as_bool() == true);
  CHECK(value.at("f").as_bool() == false);
  CHECK(value.at("int").as_int64() == -42);
  // 2^53 + 1 is not a double: integers are kept exact.
  CHECK(value.at("big").as_int64() == 9007199254740993LL);
  CHECK(value.at("real").as_double() == doctest::Approx(0.0025));
  CHECK_FALSE(value.at("real").is_integer());
  CHECK(value.at("s").as_string() == "hi");
  CHECK(value.at("a").size() == 3);
  CHECK(value.at("a").at(size_t{1}).at(size_t{0}).as_int64() == 2);
  CHECK(value.at("o").at("k").as_string() == "v");
  CHECK(value.find("missing") == nullptr);
  CHECK(Json::parse("-0.0").as_double() == 0.0);
  CHECK(Json::parse("1E+2").as_double() == 100.0);
  CHECK(Json::parse("9223372036854775807").as_int64() == std::numeric_limits<int64_t>::max());
  // Beyond int64: a double, and no longer an integer.
  CHECK_FALSE(Json::parse("9223372036854775808").is_integer());
}

TEST_CASE("json: string escapes \\u escapes and surrogate pairs") {
  const Json value = Json::parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u20ac \ud83d\ude00")");
  CHECK(value.as_string() == "q\" b\\ s/ \b\f\n\r\t A\xC3\xA9\xE2\x82\xAC \xF0\x9F\x98\x80");
  // Raw UTF-8 passes through; \u0000 gives a NUL inside the string.
  CHECK(Json::parse("\"\xC3\xA9\"").as_string() == "\xC3\xA9");
  CHECK(Json::parse(R"("a\u0000b")").as_string() == std::string("a\0b", 3));
  // The serializer escapes what it must and keeps the rest as UTF-8.
  CHECK(Json(std::string("a\0b\x1f\"\\\n\xC3\xA9", 9)).dump() ==
        "\"a\\u0000b\\u001f\\\"\\\\\\n\xC3\xA9\"");
}

TEST_CASE("json: dump is compact keeps key order and round-trips") {
  Json object = Json::object();
  object.set("zeta", 1);
  object.set("alpha", Json::Array{true, nullptr, "x", 0.5, -7});
  object.set("mid", Json::Object{{"b", 2}, {"a", 1}});
  object.set("zeta", 3);  // replaced in place, keeps its position
  const std::string text = object.dump();
  CHECK(text == R"({"zeta":3,"alpha":[true,null,"x",0.5,-7],"mid":{"b":2,"a":1}})");
  CHECK(Json::parse(text) == object);
  CHECK(Json::parse(text).dump() == text);
  // Doubles print in their shortest exact form and read back to the same value.
  for (const double x : {0.1, 1.0 / 3.0, 1e300, -2.5e-300, 123456789.0}) {
    CHECK(Json::parse(Json(x).dump()).as_double() == x);
  }
  CHECK(Json(3) == Json(3.0));
  CHECK_FALSE(Json(3) == Json("3"));
}

TEST_CASE("json: the strict parser refuses bad input and says where") {
  const char* bad[] = {
      "",                    // nothing
      "{",                   // unterminated object
      "[1,]",                // trailing comma
      "{\"a\":1,}",          // trailing comma in an object
      "01",                  // leading zero
      "1.",                  // no fraction digits
      ".5",                  // no integer part
      "+1",                  // explicit plus
      "1e",                  // empty exponent
      "NaN",                 // not JSON
      "'a'",                 // single quotes
      "tru",                 // truncated literal
      "[1 2]",               // missing comma
      "{\"a\" 1}",           // missing colon
      "{1:2}",               // non-string key
      "\"abc",               // unterminated string
      "\"a\tb\"",            // raw control character
      "\"\\x\"",             // unknown escape
      "\"\\u12G4\"",         // bad hex
      "\"\\ud800\"",         // lone high surrogate
      "\"\\udc00\"",         // lone low surrogate
      "\"\\ud800\\u0041\"",  // high surrogate + non-surrogate
      "\"\xC3\"",            // truncated UTF-8
      "\"\xC0\xAF\"",        // overlong UTF-8
      "\"\xED\xA0\x80\"",    // a surrogate encoded in UTF-8
      "1e400",               // beyond a double
      "{} x",                // trailing text
      "{\"a\":1,\"a\":2}",   // duplicate key
      "// c\n1",             // comments
  };
  for (const char* text : bad) {
    INFO("input: ", text);
    const std::string message = parse_error(text);
    CHECK(message.find("json: ") == 0);
    CHECK(message.find("line") != std::string::npos);
  }
  // The position is the line and column of the problem.
  CHECK(parse_error("{\n  \"a\": 1,\n  \"a\": 2\n}")
            .find("duplicate key \"a\" at line 3, column 3") != std::string::npos);
  CHECK(parse_error("[1,\n 2,,]").find("line 2, column 4") != std::string::npos);
  // Nesting is bounded instead of overflowing the stack.
  CHECK(parse_error(std::string(100000, '[')).find("nesting deeper") != std::string::npos);
  CHECK_NOTHROW(Json::parse(std::string(200, '[') + std::string(200, ']')));
}

TEST_CASE("json: typed access refuses the wrong type and non-integers") {
  CHECK_THROWS_AS(Json("x").as_int64(), Error);
  CHECK_THROWS_WITH_AS(Json::parse("2.0").as_int64(), doctest::Contains("expected an integer"),
                       Error);
  CHECK_THROWS_AS(Json::parse("1e3").as_int64(), Error);
  CHECK_THROWS_WITH_AS(Json(1).as_string(), "json: expected a string, got number", Error);
  CHECK_THROWS_AS(Json::object().at("k"), Error);
  CHECK_THROWS_AS(Json::array().at(size_t{0}), Error);
  CHECK_THROWS_AS(Json(true).size(), Error);
  CHECK_THROWS_AS(Json(static_cast<uint64_t>(1) << 63), Error);
  CHECK(Json(static_cast<uint32_t>(7)).as_int64() == 7);
}

TEST_CASE("json: the serializer refuses what would not parse back") {
  CHECK_THROWS_AS(Json(std::nan("")).dump(), Error);
  CHECK_THROWS_AS(Json(std::numeric_limits<double>::infinity()).dump(), Error);
  CHECK_THROWS_WITH_AS(Json(std::string("\xFF")).dump(), doctest::Contains("not valid UTF-8"),
                       Error);
}

TEST_CASE("json: what the parser adds to nlohmann's checks") {
  // nlohmann stops at a NUL byte as if the text ended there; a raw NUL is never valid JSON.
  CHECK(parse_error(std::string("{}\0junk", 7)).find("NUL byte at line 1, column 3") !=
        std::string::npos);
  CHECK(parse_error(std::string("[\"a\0b\"]", 7)).find("NUL byte") != std::string::npos);
  // Tiny numbers are refused like huge ones instead of becoming 0.
  CHECK(parse_error("[1e-400]").find("out of range for a double at line 1, column 2") !=
        std::string::npos);
  // Integers: exact within int64, a double beyond it (also beyond uint64).
  CHECK(Json::parse("-9223372036854775808").as_int64() == std::numeric_limits<int64_t>::min());
  CHECK_FALSE(Json::parse("18446744073709551615").is_integer());
  CHECK(Json::parse("18446744073709551615").as_double() == 18446744073709551615.0);
  CHECK(Json::parse("123456789012345678901234567890").as_double() == 1.2345678901234568e29);
  // Bad UTF-8 is named as such, and the message shows the byte instead of repeating it raw.
  const std::string utf8 = parse_error("[\"\xFF\"]");
  CHECK(utf8.find("invalid UTF-8") != std::string::npos);
  CHECK(parse_error("\xFF").find("\\xff") != std::string::npos);
  // A duplicate key is located at its opening quote, escaped quotes inside it included.
  CHECK(parse_error(R"({"k\"":1, "k\"":2})").find("duplicate key \"k\"\" at line 1, column 11") !=
        std::string::npos);
  // Depth: 256 levels parse, 257 do not, and the error says where the 257th opens.
  CHECK_NOTHROW(Json::parse(std::string(256, '[') + std::string(256, ']')));
  CHECK(parse_error(std::string(257, '[') + std::string(257, ']'))
            .find("nesting deeper than 256 at line 1, column 257") != std::string::npos);
}
