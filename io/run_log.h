// The per-run metrics log: one CSV file, one row per log() call, e.g.
//   phase,step,epoch,loss,accuracy,lr
//   train,100,0,2.3051,,0.0003
//   valid,265,0,1.9873,0.4120,
//
// Columns: phase, step, epoch, then the value columns, fixed for the life of the file. Either
// the constructor is given them (the header is written at once), or they are the keys of the
// first log() call in sorted order (the header is written then). A value column left out of a
// call is an empty cell; a key that is not a column throws Error (a metric silently dropped from
// the log would be worse). Names and phases must not contain ',', '"' or line breaks.
//
// Appending: when the file already holds a header (a resumed run), rows are appended under it;
// the columns given must then equal the file's (Error otherwise), and empty columns adopt them.
// A torn last line (no '\n': the process died mid-write) is cut off first.
//
// Every row is flushed to the OS as soon as it is written, so a crash or kill of the process
// loses nothing already logged (no fsync: a power cut may lose the last rows).
//
// Numbers are written in the shortest form that reads back to the same double (std::to_chars),
// so a round trip is exact; NaN and infinities are written as nan, inf and -inf.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace mixlab {

class MetricsLog {
 public:
  // With `jsonl_path`, every row is also appended there as one JSON object per line
  // ({"phase":"valid","step":265,"epoch":1,"loss":1.98,...}; empty cells left out, NaN and
  // infinities written as null), for readers that prefer records to a table.
  explicit MetricsLog(std::string path, std::vector<std::string> columns = {},
                      std::string jsonl_path = "");

  // `phase` is "train", "valid" or "test" by convention (any name without ',' is accepted).
  void log(const std::string& phase, int64_t step, int64_t epoch,
           const std::map<std::string, double>& values);

  const std::string& path() const { return path_; }
  // The value columns (empty until known).
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  void write_header();

  std::string path_;
  std::vector<std::string> columns_;
  bool header_written_ = false;
  std::ofstream out_;
  std::string jsonl_path_;
  std::ofstream jsonl_;
};

// A resumed run continues from `step`: the rows a log (CSV with a header, or JSON lines) holds
// past it, and its test rows, were written after that checkpoint and would be repeated; they
// are removed (the file is rewritten atomically). A missing file is left missing.
void drop_metrics_after(const std::string& path, int64_t step);

struct MetricsRow {
  std::string phase;
  int64_t step = 0;
  int64_t epoch = 0;
  std::map<std::string, double> values;  // the non-empty cells of the row only
};

struct MetricsTable {
  std::vector<std::string> columns;  // the value columns, in file order
  std::vector<MetricsRow> rows;      // in file order
};

// Reads a file written by MetricsLog. An empty file gives an empty table; a missing file or a
// malformed line throws Error naming the file and line. A last line without '\n' was torn by
// a crash mid-write and is skipped.
MetricsTable read_metrics_csv(const std::string& path);

}  // namespace mixlab
