// Terminal and file output for training runs: progress bar, metrics CSV, summary tables and the
// Ctrl-C flag (train/run/progress.h, run_log.h, summary.h, interrupt.h). The curves' pictures
// are tested with the lab's plot writer (tests/test_lab_plot.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/temp_dir.h"
#include "core/error.h"
#include "train/run/interrupt.h"
#include "train/run/progress.h"
#include "io/run_log.h"
#include "train/run/summary.h"
#include "tests/file_helpers.h"

using namespace mixlab;
using mixlab::testing::read_file;
namespace fs = std::filesystem;

namespace {

using mixlab::testing::TempDir;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

// ---- progress -----------------------------------------------------------------------------------

TEST_CASE("ui: format_duration") {
  CHECK(format_duration(0) == "0:00");
  CHECK(format_duration(42) == "0:42");
  CHECK(format_duration(42.4) == "0:42");
  CHECK(format_duration(59.6) == "1:00");
  CHECK(format_duration(62) == "1:02");
  CHECK(format_duration(3599) == "59:59");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_duration(100 * 3600) == "100:00:00");
  CHECK(format_duration(-1) == "-:--");
  CHECK(format_duration(kNaN) == "-:--");
  CHECK(format_duration(std::numeric_limits<double>::infinity()) == "-:--");
}

TEST_CASE("ui: progress line formatting and ETA") {
  const ProgressBar::Fields fields = {{"loss", "1.234"}, {"lr", "3.0e-04"}, {"ex/s", "1520"}};
  // 120 of 265 steps in 100 s: 145 more at 120/100 steps a second is 120.8 s.
  CHECK(ProgressBar::format_line("epoch 3/10", 120, 265, 100.0, fields, 20, false) ==
        "epoch 3/10 [#########...........]  45% 120/265 ETA 2:01 loss 1.234 lr 3.0e-04 "
        "ex/s 1520");
  // Plain lines carry no bar.
  CHECK(ProgressBar::format_line("epoch 3/10", 120, 265, 100.0, {{"loss", "1.234"}}, 0, false) ==
        "epoch 3/10 120/265  45% ETA 2:01 loss 1.234");
  // Nothing done yet: no pace, no ETA.
  CHECK(ProgressBar::format_line("epoch 1/2", 0, 10, 3.0, {}, 4, false) ==
        "epoch 1/2 [....]   0% 0/10 ETA -:--");
  // The end: a full bar and the elapsed time.
  CHECK(ProgressBar::format_line("epoch 1/2", 10, 10, 65.0, {}, 4, true) ==
        "epoch 1/2 [####] 100% 10/10 in 1:05");
  // Unknown total: just the count.
  CHECK(ProgressBar::format_line("eval", 17, 0, 5.0, {}, 20, false) == "eval 17 steps");
  // More done than announced is clamped, not a negative ETA.
  CHECK(ProgressBar::format_line("", 12, 10, 5.0, {}, 0, false) == "12/10 100% ETA -:--");
}

TEST_CASE("ui: progress in plain mode writes lines without carriage returns") {
  std::ostringstream out;
  {
    ProgressBar bar("epoch 1/1", 4, out);
    CHECK_FALSE(bar.interactive());  // a string stream is never a terminal
    bar.set_plain_interval(0);       // every update prints
    for (int64_t step = 1; step <= 3; ++step) bar.update(step, {{"loss", "0.5"}});
    bar.finish({{"loss", "0.25"}});
    bar.update(4, {});  // after finish: ignored
  }
  const std::string text = out.str();
  CHECK(text.find('\r') == std::string::npos);
  CHECK(text.find('\033') == std::string::npos);
  const auto lines = lines_of(text);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].rfind("epoch 1/1 1/4  25% ETA ", 0) == 0);
  CHECK(lines[0].find("loss 0.5") != std::string::npos);
  CHECK(lines[3].rfind("epoch 1/1 3/4  75% in ", 0) == 0);
  CHECK(lines[3].find("loss 0.25") != std::string::npos);

  // The default interval (10 s) stays quiet during a short epoch, then reports its end.
  std::ostringstream quiet;
  {
    ProgressBar bar("epoch 2/2", 100, quiet, true);
    for (int64_t step = 1; step <= 100; ++step) bar.update(step, {});
    bar.finish();
  }
  const auto quiet_lines = lines_of(quiet.str());
  REQUIRE(quiet_lines.size() == 1);
  CHECK(quiet_lines[0].rfind("epoch 2/2 100/100 100% in 0:0", 0) == 0);
}

// ---- metrics CSV --------------------------------------------------------------------------------

TEST_CASE("ui: metrics csv round trip with flush after every row") {
  TempDir dir;
  const std::string path = dir.file("metrics.csv");
  {
    MetricsLog log(path, {"loss", "accuracy", "lr"});
    CHECK(read_file(path) == "phase,step,epoch,loss,accuracy,lr\n");  // header at once
    log.log("train", 100, 0, {{"loss", 2.5}, {"lr", 3e-4}});
    log.log("valid", 265, 0, {{"loss", 0.1}, {"accuracy", 1.0 / 3.0}});
    log.log("train", 300, 1, {{"loss", kNaN}, {"lr", 1e-300}});
    // Every row is on disk while the log is still open.
    CHECK(lines_of(read_file(path)).size() == 4);
    CHECK(lines_of(read_file(path))[1] == "train,100,0,2.5,,3e-04");
    CHECK_THROWS_AS(log.log("train", 1, 0, {{"bleu", 1.0}}), Error);  // not a column
    CHECK_THROWS_AS(log.log("tr,ain", 1, 0, {{"loss", 1.0}}), Error);
  }
  MetricsTable table = read_metrics_csv(path);
  CHECK(table.columns == std::vector<std::string>{"loss", "accuracy", "lr"});
  REQUIRE(table.rows.size() == 3);
  CHECK(table.rows[0].phase == "train");
  CHECK(table.rows[0].step == 100);
  CHECK(table.rows[0].epoch == 0);
  CHECK(table.rows[0].values.size() == 2);
  CHECK(table.rows[0].values.at("loss") == 2.5);
  CHECK(table.rows[0].values.at("lr") == 3e-4);
  CHECK(table.rows[1].phase == "valid");
  CHECK(table.rows[1].values.at("loss") == 0.1);  // exact: shortest round-trip formatting
  CHECK(table.rows[1].values.at("accuracy") == 1.0 / 3.0);
  CHECK(table.rows[1].values.count("lr") == 0);
  CHECK(std::isnan(table.rows[2].values.at("loss")));
  CHECK(table.rows[2].values.at("lr") == 1e-300);

  // A resumed run appends under the same header; different columns are refused.
  CHECK_THROWS_AS(MetricsLog(path, {"loss"}), Error);
  {
    MetricsLog log(path);
    CHECK(log.columns() == std::vector<std::string>{"loss", "accuracy", "lr"});
    log.log("test", 400, 2, {{"accuracy", 0.75}});
  }
  table = read_metrics_csv(path);
  REQUIRE(table.rows.size() == 4);
  CHECK(table.rows[3].phase == "test");
  CHECK(table.rows[3].values.at("accuracy") == 0.75);

  // A row torn by a crash (no final newline) is skipped by the reader and cut by the next log.
  { std::ofstream(path, std::ios::app | std::ios::binary) << "train,500,2,1.2"; }
  CHECK(read_metrics_csv(path).rows.size() == 4);
  {
    MetricsLog log(path);
    log.log("train", 500, 2, {{"loss", 1.25}});
  }
  table = read_metrics_csv(path);
  REQUIRE(table.rows.size() == 5);
  CHECK(table.rows[4].values.at("loss") == 1.25);

  // A malformed complete line is an error naming the line.
  { std::ofstream(path, std::ios::app | std::ios::binary) << "train,x,2,1,,\n"; }
  CHECK_THROWS_WITH_AS(read_metrics_csv(path), doctest::Contains(":7: malformed row"), Error);
  CHECK_THROWS_AS(read_metrics_csv(dir.file("missing.csv")), Error);
}

TEST_CASE("ui: metrics log takes its columns from the first row when none are given") {
  TempDir dir;
  const std::string path = dir.file("m.csv");
  MetricsLog log(path);
  CHECK(read_file(path).empty());  // no header until the columns are known
  log.log("train", 1, 0, {{"loss", 1.0}, {"acc", 0.5}});
  log.log("valid", 2, 0, {{"acc", 0.25}});
  CHECK(log.columns() == std::vector<std::string>{"acc", "loss"});
  CHECK(read_file(path) == "phase,step,epoch,acc,loss\ntrain,1,0,0.5,1\nvalid,2,0,0.25,\n");
}

// ---- tables and numbers -------------------------------------------------------------------------

TEST_CASE("ui: format_table aligns columns") {
  const std::string table = format_table(
      {"mixer", "params", "loss"}, {{"attention", "1,234,567", "0.123"}, {"fnet", "12", "10.5"}});
  CHECK(table ==
        "mixer         params   loss\n"
        "---------------------------\n"
        "attention  1,234,567  0.123\n"
        "fnet              12   10.5\n");
  // Short rows are padded (no trailing spaces); UTF-8 counts characters; text stays left.
  CHECK(format_table({"name", "note"}, {{"a"}, {"\xC3\xA9t\xC3\xA9", "x"}, {"bb", "long note"}}) ==
        "name  note\n"
        "---------------\n"
        "a\n"
        "\xC3\xA9t\xC3\xA9   x\n"
        "bb    long note\n");
  CHECK_THROWS_AS(format_table({"one"}, {{"a", "b"}}), Error);
}

TEST_CASE("ui: format_number and format_count") {
  CHECK(format_number(1.23456, 3) == "1.235");
  CHECK(format_number(2.0, 0) == "2");
  CHECK(format_number(3e-4, 3) == "3.000e-04");  // would print as 0.000
  CHECK(format_number(1.5e10, 2) == "1.50e+10");
  CHECK(format_number(-0.0001, 2) == "-1.00e-04");
  CHECK(format_number(-0.0004, 3) == "-4.000e-04");
  CHECK(format_number(-0.00049, 3) == "-4.900e-04");
  CHECK(format_number(1.5, 40) == "1.50000000000000000");  // precision clamped to 17
  CHECK(format_number(0.0, 2) == "0.00");
  CHECK(format_number(-0.0, 2) == "0.00");
  CHECK(format_number(-0.004, 2) == "-4.00e-03");
  CHECK(format_number(-0.006, 2) == "-6.00e-03");
  CHECK(format_number(-0.016, 2) == "-0.02");
  CHECK(format_number(kNaN, 2) == "nan");
  CHECK(format_number(-std::numeric_limits<double>::infinity(), 2) == "-inf");

  CHECK(format_count(0) == "0");
  CHECK(format_count(999) == "999");
  CHECK(format_count(1000) == "1,000");
  CHECK(format_count(1234567) == "1,234,567");
  CHECK(format_count(-1234) == "-1,234");
  CHECK(format_count(std::numeric_limits<int64_t>::min()) == "-9,223,372,036,854,775,808");
}

// ---- interrupt ----------------------------------------------------------------------------------

TEST_CASE("ui: interrupt flag set by SIGINT and SIGTERM and cleared") {
  install_interrupt_handler();
  CHECK_FALSE(interrupted());
  std::raise(SIGINT);  // delivered before raise returns in a single-threaded caller
  CHECK(interrupted());
  CHECK(interrupt_signal() == SIGINT);
  clear_interrupt();
  CHECK_FALSE(interrupted());
  CHECK(interrupt_signal() == 0);
  std::raise(SIGTERM);
  CHECK(interrupted());
  CHECK(interrupt_signal() == SIGTERM);
  install_interrupt_handler();  // idempotent, and starts from a clear flag
  CHECK_FALSE(interrupted());
  uninstall_interrupt_handler();  // gives doctest its own handlers back
}
