#include "train/run/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace mixlab {

namespace {

// Display width of UTF-8 text: continuation bytes (10xxxxxx) do not start a new character.
size_t display_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

// True for cells such as "12", "-3.5", "1,234", "3.0e-04", "45%", "+inf", "nan": digits (with
// at most separators, a sign, a point, an exponent or a percent sign around them).
bool looks_numeric(const std::string& cell) {
  if (cell == "nan" || cell == "inf" || cell == "-inf" || cell == "+inf") return true;
  bool digit = false;
  for (size_t i = 0; i < cell.size(); ++i) {
    const char c = cell[i];
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c == '-' || c == '+') {
      if (i != 0 && cell[i - 1] != 'e' && cell[i - 1] != 'E') return false;
    } else if (c == '%') {
      if (i + 1 != cell.size()) return false;
    } else if (c != '.' && c != ',' && c != 'e' && c != 'E') {
      return false;
    }
  }
  return digit;
}

void append_padded(std::string& line, const std::string& cell, size_t width, bool right) {
  const size_t pad = width - display_width(cell);
  if (right) line.append(pad, ' ');
  line += cell;
  if (!right) line.append(pad, ' ');
}

}  // namespace

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  const size_t columns = header.size();
  std::vector<size_t> width(columns);
  for (size_t c = 0; c < columns; ++c) width[c] = display_width(header[c]);
  for (size_t r = 0; r < rows.size(); ++r) {
    check(rows[r].size() <= columns, "format_table: row ", r, " has ", rows[r].size(),
          " cells but the header has ", columns);
    for (size_t c = 0; c < rows[r].size(); ++c)
      width[c] = std::max(width[c], display_width(rows[r][c]));
  }
  // A column is right-aligned when every non-empty body cell is numeric (the header follows it,
  // so that "loss" sits over the digits' right edge).
  std::vector<bool> right(columns, false);
  for (size_t c = 0; c < columns; ++c) {
    bool any = false, all = true;
    for (const auto& row : rows) {
      if (c >= row.size() || row[c].empty()) continue;
      any = true;
      all = all && looks_numeric(row[c]);
    }
    right[c] = any && all;
  }

  auto emit = [&](const std::vector<std::string>& cells, std::string& out) {
    std::string line;
    static const std::string kEmpty;
    for (size_t c = 0; c < columns; ++c) {
      if (c > 0) line += "  ";
      append_padded(line, c < cells.size() ? cells[c] : kEmpty, width[c], right[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };

  std::string out;
  emit(header, out);
  size_t total = 0;
  for (size_t c = 0; c < columns; ++c) total += width[c] + (c > 0 ? 2 : 0);
  out.append(total, '-');
  out += '\n';
  for (const auto& row : rows) emit(row, out);
  return out;
}

std::string format_number(double value, int precision) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  precision = std::clamp(precision, 0, 17);
  const double magnitude = std::fabs(value);
  const bool scientific =
      magnitude >= 1e9 || (magnitude > 0 && magnitude < std::pow(10.0, -precision));
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, scientific ? "%.*e" : "%.*f", precision, value);
  std::string text = buffer;
  // A negative value that rounds to zero would print as "-0.000".
  if (text[0] == '-' && text.find_first_not_of("-0.") == std::string::npos) text.erase(0, 1);
  return text;
}

std::string format_count(int64_t value) {
  // Through uint64_t so that INT64_MIN has a magnitude.
  uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  std::string digits = std::to_string(magnitude);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace mixlab
