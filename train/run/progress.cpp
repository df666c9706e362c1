#include "train/run/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/ioctl.h>
#include <unistd.h>

#include "core/settings.h"

namespace mixlab {

namespace {

constexpr int kBarWidth = 20;
constexpr double kRedrawSeconds = 0.1;  // at most ~10 redraws a second on a terminal

// The file descriptor behind one of the standard streams, or -1.
int stream_fd(const std::ostream& out) {
  if (&out == &std::cerr || &out == &std::clog) return STDERR_FILENO;
  if (&out == &std::cout) return STDOUT_FILENO;
  return -1;
}

bool is_interactive(const std::ostream& out) {
  const int fd = stream_fd(out);
  if (fd < 0 || !::isatty(fd)) return false;
  const char* term = setting(Setting::Term);
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

// Terminal width, so that a long line can be cut instead of wrapping (a wrapped line cannot be
// redrawn with '\r': every redraw would leave one more line behind).
size_t terminal_columns(const std::ostream& out) {
  winsize size{};
  const int fd = stream_fd(out);
  if (fd >= 0 && ::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-:--";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  char buffer[48];
  if (h > 0) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(s));
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld", static_cast<long long>(m),
                  static_cast<long long>(s));
  }
  return buffer;
}

std::string ProgressBar::format_line(const std::string& label, int64_t done, int64_t total,
                                     double elapsed_seconds, const Fields& fields, int bar_width,
                                     bool final) {
  std::string line = label;
  auto add = [&line](const std::string& piece) {
    if (!line.empty()) line += ' ';
    line += piece;
  };
  if (total > 0) {
    const double fraction = std::clamp(static_cast<double>(done) / total, 0.0, 1.0);
    if (bar_width > 0) {
      // Floor, so the bar is only full when the epoch is.
      const int filled = static_cast<int>(fraction * bar_width);
      std::string bar(static_cast<size_t>(bar_width) + 2, '.');
      bar.front() = '[';
      bar.back() = ']';
      std::fill_n(bar.begin() + 1, filled, '#');
      add(bar);
    }
    char percent[16];
    std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(fraction * 100));
    // The bar's line reads "[...]  45% 120/265", the plain one "120/265  45%" (the percentage
    // is padded to 3 digits so that the text after it does not jump around).
    if (bar_width > 0) {
      add(percent);
      add(std::to_string(done) + "/" + std::to_string(total));
    } else {
      add(std::to_string(done) + "/" + std::to_string(total));
      add(percent);
    }
  } else {
    add(std::to_string(done) + " steps");
  }
  if (final) {
    add("in " + format_duration(elapsed_seconds));
  } else if (total > 0) {
    // Remaining time at the average pace so far; unknown until a step has completed.
    const double eta = done > 0 && done <= total
                           ? elapsed_seconds * static_cast<double>(total - done) / done
                           : -1.0;
    add("ETA " + format_duration(eta));
  }
  for (const auto& [name, value] : fields) add(name + " " + value);
  return line;
}

ProgressBar::ProgressBar(std::string label, int64_t total_steps, std::ostream& out,
                         bool force_plain)
    : label_(std::move(label)),
      total_(total_steps),
      out_(out),
      interactive_(!force_plain && is_interactive(out)),
      start_(Clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (drawn_ && !finished_) {
    out_ << '\n';
    out_.flush();
  }
}

double ProgressBar::seconds_since(Clock::time_point t) const {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void ProgressBar::update(int64_t done, const Fields& fields) {
  if (finished_) return;
  done_ = done;
  const double since = seconds_since(last_draw_);
  if (interactive_) {
    if (drawn_ && since < kRedrawSeconds) return;
  } else if (since < plain_interval_) {
    return;
  }
  draw(fields, false);
}

void ProgressBar::finish(const Fields& fields) {
  if (finished_) return;
  draw(fields, true);
  finished_ = true;
}

void ProgressBar::draw(const Fields& fields, bool final) {
  const double elapsed = seconds_since(start_);
  last_draw_ = Clock::now();
  if (interactive_) {
    // Fit the terminal by dropping the last fields, then the bar, before cutting anything.
    const size_t columns = terminal_columns(out_);
    Fields shown = fields;
    int bar_width = kBarWidth;
    std::string line = format_line(label_, done_, total_, elapsed, shown, bar_width, final);
    while (line.size() >= columns && (!shown.empty() || bar_width > 0)) {
      if (!shown.empty())
        shown.pop_back();
      else
        bar_width = 0;
      line = format_line(label_, done_, total_, elapsed, shown, bar_width, final);
    }
    if (line.size() >= columns) {
      // Cut at a character boundary (never inside a UTF-8 sequence).
      size_t cut = columns - 1;
      while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
      line.resize(cut);
    }
    // "\033[K" erases what a longer previous line left to the right.
    out_ << '\r' << line << "\033[K";
    if (final) out_ << '\n';
    drawn_ = !final;
  } else {
    out_ << format_line(label_, done_, total_, elapsed, fields, 0, final) << '\n';
  }
  out_.flush();
}

}  // namespace mixlab
