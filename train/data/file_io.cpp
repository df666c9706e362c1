#include "train/data/file_io.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <zlib.h>

#include "core/error.h"

namespace mixlab {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Closes the gz handle on every path out, including the throwing ones.
struct GzCloser {
  gzFile file;
  ~GzCloser() {
    if (file != nullptr) gzclose(file);
  }
};

}  // namespace

std::string read_file_maybe_gz(const std::string& path) {
  std::error_code ec;
  check(std::filesystem::is_regular_file(path, ec), path, ": no such file");
  GzCloser handle{gzopen(path.c_str(), "rb")};
  check(handle.file != nullptr, path, ": cannot open for reading");
  gzbuffer(handle.file, 1 << 17);
  std::string content;
  constexpr unsigned kChunk = 1u << 20;
  for (;;) {
    const size_t old_size = content.size();
    content.resize(old_size + kChunk);
    const int got = gzread(handle.file, content.data() + old_size, kChunk);
    int errnum = Z_OK;
    const char* message = gzerror(handle.file, &errnum);
    // zlib reports a gzip stream cut short as Z_BUF_ERROR ("unexpected end of file").
    if (got < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
      // zlib prefixes its message with the path; keep only the reason.
      std::string reason = message != nullptr ? message : "unknown zlib error";
      if (reason.rfind(path + ": ", 0) == 0) reason.erase(0, path.size() + 2);
      fail(path, ": cannot read (", reason, "); the file is truncated or corrupt");
    }
    content.resize(old_size + static_cast<size_t>(got));
    if (got == 0) break;
  }
  return content;
}

size_t find_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // overlong
      if (lead == 0xED) high = 0x9F;  // UTF-16 surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // overlong
      if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
    } else {
      return i;  // a continuation byte without a lead, an overlong lead, or 0xF5..0xFF
    }
    if (i + length > text.size() || byte(i + 1) < low || byte(i + 1) > high) return i;
    for (size_t k = 2; k < length; ++k)
      if ((byte(i + k) & 0xC0) != 0x80) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string read_text_file(const std::string& path) {
  std::string text = read_file_maybe_gz(path);
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    const std::string_view before(text.data(), bad);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    const size_t line_start = before.rfind('\n');
    const size_t column = bad - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
    fail(path, ":", line, ": invalid UTF-8 (byte ", hex, " at column ", column,
         "); text data files must be UTF-8");
  }
  return text;
}

std::string find_plain_or_gz(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return path;
  if (std::filesystem::is_regular_file(path + ".gz", ec)) return path + ".gz";
  return "";
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::vector<std::string_view> split_whitespace(std::string_view text) {
  std::vector<std::string_view> pieces;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) pieces.push_back(text.substr(start, i - start));
  }
  return pieces;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace mixlab
