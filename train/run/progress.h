// A progress reporter for training epochs.
//
// On an interactive terminal it redraws one line in place (carriage return, then "erase to end
// of line"), at most 10 times a second:
//   epoch 3/10 [#########...........]  45% 120/265 ETA 0:42 loss 1.234 lr 3.0e-04 ex/s 1520
// Anywhere else (stderr redirected to a log file, TERM=dumb, or force_plain) it writes plain
// lines without '\r' or escape codes, one every plain_interval seconds (default 10) and one at
// finish(), so logs stay readable:
//   epoch 3/10 120/265  45% ETA 0:42 loss 1.234 lr 3.0e-04 ex/s 1520
//
// Interactive means: `out` is std::cerr or std::clog and stderr is a TTY, or `out` is std::cout
// and stdout is a TTY; and TERM is not "dumb". Any other stream is never interactive.
//
// total_steps <= 0 means "unknown": no bar, percentage or ETA, just the step count.
// Not thread-safe: one thread drives one bar.
#pragma once
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace mixlab {

// "0:42" under an hour, "1:02:03" from one hour on (hours are not wrapped into days); rounded
// to the nearest second. Negative or non-finite durations give "-:--".
std::string format_duration(double seconds);

class ProgressBar {
 public:
  using Fields = std::vector<std::pair<std::string, std::string>>;

  ProgressBar(std::string label, int64_t total_steps, std::ostream& out = std::cerr,
              bool force_plain = false);
  // Ends an interactive line left open (an exception unwound past finish()).
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` steps out of total_steps are complete; `fields` ({"loss", "1.234"}, ...) follow the
  // counters in the given order. Cheap when nothing is printed, so it can be called every step.
  void update(int64_t done, const Fields& fields = {});

  // Prints the final state (the last `done` seen, with the elapsed time instead of the ETA) and
  // ends the line. Further update()/finish() calls are ignored.
  void finish(const Fields& fields = {});

  bool interactive() const { return interactive_; }
  // Seconds between plain lines (0 prints every update); ignored on a terminal.
  void set_plain_interval(double seconds) { plain_interval_ = seconds; }

  // One line of text as it would be printed, without '\r' or escape codes; `bar_width` 0 omits
  // the bar. `final` shows "in <elapsed>" instead of the ETA. Public for tests.
  static std::string format_line(const std::string& label, int64_t done, int64_t total,
                                 double elapsed_seconds, const Fields& fields, int bar_width,
                                 bool final);

 private:
  using Clock = std::chrono::steady_clock;
  void draw(const Fields& fields, bool final);
  double seconds_since(Clock::time_point t) const;

  std::string label_;
  int64_t total_;
  std::ostream& out_;
  bool interactive_;
  double plain_interval_ = 10.0;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  int64_t done_ = 0;
  bool drawn_ = false;  // an interactive line is open (needs '\n' before other output)
  bool finished_ = false;
};

}  // namespace mixlab
