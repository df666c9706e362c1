#include "io/run_log.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/fault_hooks.h"
#include "io/json.h"

namespace mixlab {

namespace {

const std::vector<std::string> kFixedColumns = {"phase", "step", "epoch"};

void check_name(const std::string& name, const std::string& what, const std::string& path) {
  check(!name.empty() && name.find_first_of(",\"\r\n") == std::string::npos, path, ": ", what, " '",
        name, "' is empty or contains ',', '\"' or a line break");
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> cells;
  size_t begin = 0;
  while (true) {
    const size_t comma = line.find(',', begin);
    cells.push_back(line.substr(begin, comma - begin));
    if (comma == std::string::npos) return cells;
    begin = comma + 1;
  }
}

std::string format_double(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

template <typename T>
bool parse_number(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  return result.ec == std::errc() && result.ptr == end;
}

// The header's value columns, or an Error when `line` is not a MetricsLog header.
std::vector<std::string> parse_header(const std::string& line, const std::string& path) {
  std::vector<std::string> cells = split_commas(line);
  check(cells.size() >= kFixedColumns.size() &&
            std::equal(kFixedColumns.begin(), kFixedColumns.end(), cells.begin()),
        path, ":1: not a metrics log header (expected phase,step,epoch,...): '", line, "'");
  return std::vector<std::string>(cells.begin() + kFixedColumns.size(), cells.end());
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), path, ": cannot open: ", std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// After writing a row: a failed stream names the file and the system's reason (a full disk says
// so). The fault hook MIXLAB_FAULT_ENOSPC makes every append to the named file fail that way.
void check_appended(std::ostream& out, const std::string& path) {
  int error = errno;
  if (fault_hooks::enospc_limit(path) >= 0) {
    out.setstate(std::ios::badbit);
    error = ENOSPC;
  }
  if (out.good()) return;
  if (error == ENOSPC)
    fail(path, ": write failed: ", std::strerror(ENOSPC),
         ": the disk is full; free space and rerun");
  fail(path, ": write failed", error != 0 ? std::string(": ") + std::strerror(error) : "");
}

std::string strip_cr(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace

MetricsLog::MetricsLog(std::string path, std::vector<std::string> columns, std::string jsonl_path)
    : path_(std::move(path)), columns_(std::move(columns)), jsonl_path_(std::move(jsonl_path)) {
  if (!jsonl_path_.empty()) {
    announce_file_write(jsonl_path_);
    jsonl_.open(jsonl_path_, std::ios::binary | std::ios::app);
    check(jsonl_.is_open(), jsonl_path_, ": cannot open for appending: ", std::strerror(errno));
  }
  for (const auto& c : columns_) check_name(c, "column name", path_);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  if (!ec && size > 0) {
    std::string content = read_whole_file(path_);
    // Drop a torn last line so that the next row starts on a line of its own.
    if (content.back() != '\n') {
      const size_t keep = content.rfind('\n') == std::string::npos ? 0 : content.rfind('\n') + 1;
      std::filesystem::resize_file(path_, keep, ec);
      check(!ec, path_, ": cannot cut the torn last line: ", ec.message());
      content.resize(keep);
    }
    if (!content.empty()) {
      const std::vector<std::string> existing =
          parse_header(strip_cr(content.substr(0, content.find('\n'))), path_);
      if (columns_.empty()) {
        columns_ = existing;
      } else {
        check(columns_ == existing, path_, ": the file's columns differ from the ones given");
      }
      header_written_ = true;
    }
  }
  announce_file_write(path_);
  out_.open(path_, std::ios::binary | std::ios::app);
  check(out_.is_open(), path_, ": cannot open for appending: ", std::strerror(errno));
  if (!header_written_ && !columns_.empty()) write_header();
}

void MetricsLog::write_header() {
  std::string line;
  for (const auto& c : kFixedColumns) line += (line.empty() ? "" : ",") + c;
  for (const auto& c : columns_) line += "," + c;
  errno = 0;
  out_ << line << '\n';
  out_.flush();
  check_appended(out_, path_);
  header_written_ = true;
}

void MetricsLog::log(const std::string& phase, int64_t step, int64_t epoch,
                     const std::map<std::string, double>& values) {
  check_name(phase, "phase", path_);
  if (!header_written_) {
    // Union-on-first-use: the first call's keys, in std::map (sorted) order.
    for (const auto& [name, value] : values) {
      check_name(name, "column name", path_);
      columns_.push_back(name);
    }
    check(!columns_.empty(), path_, ": the first row must name at least one value");
    write_header();
  }
  for (const auto& [name, value] : values) {
    check(std::find(columns_.begin(), columns_.end(), name) != columns_.end(), path_, ": '", name,
          "' is not a column of this log");
  }
  std::string line = phase + "," + std::to_string(step) + "," + std::to_string(epoch);
  for (const auto& c : columns_) {
    line += ',';
    const auto it = values.find(c);
    if (it != values.end()) line += format_double(it->second);
  }
  // One write per row, flushed at once: a crash can tear at most the row being written.
  line += '\n';
  errno = 0;
  out_ << line;
  out_.flush();
  check_appended(out_, path_);
  if (jsonl_path_.empty()) return;
  Json record = Json::object();
  record.set("phase", phase);
  record.set("step", step);
  record.set("epoch", epoch);
  for (const auto& c : columns_) {
    const auto it = values.find(c);
    if (it == values.end()) continue;
    record.set(c, std::isfinite(it->second) ? Json(it->second) : Json());
  }
  errno = 0;
  jsonl_ << record.dump() << '\n';
  jsonl_.flush();
  check_appended(jsonl_, jsonl_path_);
}

void drop_metrics_after(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return;
  const std::string content = read_whole_file(path);
  const bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  std::string kept;
  size_t begin = 0;
  for (int64_t line_number = 1; begin < content.size(); ++line_number) {
    const size_t newline = content.find('\n', begin);
    if (newline == std::string::npos) break;  // a torn last line
    const std::string line = content.substr(begin, newline + 1 - begin);
    begin = newline + 1;
    bool keep = true;
    if (jsonl) {
      const Json record = Json::parse(line);
      keep = record.at("phase").as_string() != "test" && record.at("step").as_int64() <= step;
    } else if (line_number > 1) {
      const std::vector<std::string> cells =
          split_commas(strip_cr(line.substr(0, line.size() - 1)));
      int64_t row_step = 0;
      keep = cells.size() < 2 || !parse_number(cells[1], row_step) ||
             (cells[0] != "test" && row_step <= step);
    }
    if (keep) kept += line;
  }
  if (kept.size() != content.size()) write_file_atomically(path, std::string_view(kept));
}

MetricsTable read_metrics_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.is_open(), path, ": cannot open: ", std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string content = buffer.str();

  MetricsTable table;
  size_t begin = 0;
  int64_t line_number = 0;
  while (begin < content.size()) {
    const size_t newline = content.find('\n', begin);
    const bool torn = newline == std::string::npos;
    // MetricsLog ends every line with '\n': a last line without one was cut short by a crash
    // (even if it happens to parse, a number in it may be truncated).
    if (torn) break;
    const std::string line = strip_cr(content.substr(begin, newline - begin));
    begin = newline + 1;
    ++line_number;
    if (line_number == 1) {
      table.columns = parse_header(line, path);
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_commas(line);
    MetricsRow row;
    bool ok = cells.size() == kFixedColumns.size() + table.columns.size() && !cells[0].empty() &&
              parse_number(cells[1], row.step) && parse_number(cells[2], row.epoch);
    for (size_t c = 0; ok && c < table.columns.size(); ++c) {
      const std::string& cell = cells[kFixedColumns.size() + c];
      if (cell.empty()) continue;
      double value = 0;
      ok = parse_number(cell, value);
      if (ok) row.values[table.columns[c]] = value;
    }
    check(ok, path, ":", line_number, ": malformed row: '", line, "'");
    row.phase = cells[0];
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace mixlab
