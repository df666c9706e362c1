#include "lab/plot.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"
#include "lab/svg.h"
#include "train/loop/trainer.h"

namespace mixlab::lab {

namespace {

// Ten distinct colours (matplotlib's tab10); series past ten change marker shape (scatter) or
// are dashed (lines).
constexpr std::array<const char*, 10> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                  "#bcbd22", "#17becf"};
const char* colour(size_t i) { return kPalette[i % kPalette.size()]; }

// The colour a series is drawn in: its own, else the palette's for its place.
std::string series_colour(const std::vector<ChartSeries>& series, size_t i) {
  return series[i].colour.empty() ? colour(i) : series[i].colour;
}

// The plot area and the data ranges it shows (log10 of the data on a log axis).
struct Axes {
  double left = 74, top = 44, width = 520, height = 320;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_x = false, log_y = false;
  double fx(double x) const {
    const double v = log_x ? std::log10(x) : x;
    return left + (v - x0) / (x1 - x0) * width;
  }
  double fy(double y) const {
    const double v = log_y ? std::log10(y) : y;
    return top + height - (v - y0) / (y1 - y0) * height;
  }
};

bool drawable(const Axes& a, double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && (!a.log_x || x > 0) && (!a.log_y || y > 0);
}

void widen(double& lo, double& hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) lo -= 0.5, hi += 0.5;
}

// Fits the ranges to every drawable point (with its error bar); false when there is none.
bool fit_axes(Axes& a, const std::vector<ChartSeries>& series) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      const double x = s.x[i], y = s.y[i];
      if (!drawable(a, x, y)) continue;
      const double e = i < s.y_err.size() && std::isfinite(s.y_err[i]) ? s.y_err[i] : 0.0;
      const double lx = a.log_x ? std::log10(x) : x;
      x0 = std::min(x0, lx), x1 = std::max(x1, lx);
      y0 = std::min(y0, a.log_y ? std::log10(y) : y - e);
      y1 = std::max(y1, a.log_y ? std::log10(y) : y + e);
    }
  const bool any = std::isfinite(x0);
  widen(x0, x1);
  widen(y0, y1);
  const double padx = 0.04 * (x1 - x0), pady = 0.06 * (y1 - y0);
  a.x0 = x0 - padx, a.x1 = x1 + padx, a.y0 = y0 - pady, a.y1 = y1 + pady;
  return any;
}

// Tick positions (in axis units: log10 on a log axis) and their labels.
struct Tick {
  double at;
  std::string label;
};
std::vector<Tick> axis_ticks(double lo, double hi, bool log) {
  std::vector<Tick> out;
  if (log) {  // 1, 2 and 5 times the powers of ten, when at least three fall inside
    for (double e = std::floor(lo); e <= hi; ++e)
      for (double m : {1.0, 2.0, 5.0})
        if (const double t = e + std::log10(m); t >= lo && t <= hi)
          out.push_back({t, tick_label(std::pow(10.0, t), std::pow(10.0, t))});
    if (out.size() >= 3) return out;
    out.clear();  // less than a decade: nice values of the range itself, placed on the log axis
    const std::vector<double> values = nice_ticks(std::pow(10.0, lo), std::pow(10.0, hi));
    const double step = values.size() > 1 ? values[1] - values[0] : 0;
    for (double v : values)
      if (v > 0) out.push_back({std::log10(v), tick_label(v, step)});
    return out;
  }
  const std::vector<double> values = nice_ticks(lo, hi);
  const double step = values.size() > 1 ? values[1] - values[0] : 0;
  for (double v : values) out.push_back({v, tick_label(v, step)});
  return out;
}

std::string line(double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line x1=\"" + svg_px(x1) + "\" y1=\"" + svg_px(y1) + "\" x2=\"" + svg_px(x2) +
         "\" y2=\"" + svg_px(y2) + "\" " + style + "/>\n";
}

// Frame, grid, ticks with labels, axis labels and the title.
std::string draw_axes(const Axes& a, const std::string& title, const std::string& x_label,
                      const std::string& y_label, bool has_data) {
  std::string s = svg_text(a.left, 24, title, 16, "font-weight=\"bold\"");
  s += "<rect x=\"" + svg_px(a.left) + "\" y=\"" + svg_px(a.top) + "\" width=\"" + svg_px(a.width) +
       "\" height=\"" + svg_px(a.height) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  const double bottom = a.top + a.height;
  for (const Tick& t : axis_ticks(a.x0, a.x1, a.log_x)) {
    const double x = a.left + (t.at - a.x0) / (a.x1 - a.x0) * a.width;
    s += line(x, a.top, x, bottom, "stroke=\"#e4e4e4\"");
    s += line(x, bottom, x, bottom + 5, "stroke=\"#444\"");
    s += svg_text(x, bottom + 18, t.label, 11, "class=\"tick-x\" text-anchor=\"middle\"");
  }
  for (const Tick& t : axis_ticks(a.y0, a.y1, a.log_y)) {
    const double y = bottom - (t.at - a.y0) / (a.y1 - a.y0) * a.height;
    s += line(a.left, y, a.left + a.width, y, "stroke=\"#e4e4e4\"");
    s += line(a.left - 5, y, a.left, y, "stroke=\"#444\"");
    s += svg_text(a.left - 8, y + 4, t.label, 11, "class=\"tick-y\" text-anchor=\"end\"");
  }
  s += svg_text(a.left + a.width / 2, bottom + 38, x_label + (a.log_x ? " (log scale)" : ""), 12,
                "class=\"axis-label\" text-anchor=\"middle\"");
  s += "<text class=\"axis-label\" transform=\"translate(16," + svg_px(a.top + a.height / 2) +
       ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">" +
       xml_escape(y_label + (a.log_y ? " (log scale)" : "")) + "</text>\n";
  if (!has_data)
    s += svg_text(a.left + a.width / 2, a.top + a.height / 2, "no data", 14,
                  "text-anchor=\"middle\" fill=\"#888\"");
  return s;
}

// Marker i, a whole element: a colour, and past ten a shape (circle, square, triangle,
// diamond); `inner` (e.g. a <title> tooltip) goes inside it.
std::string marker(size_t i, const std::string& fill, double x, double y, double r,
                   const std::string& extra = "", const std::string& inner = "") {
  const std::string attributes = " fill=\"" + fill + "\" " + extra;
  std::string tag, shape;
  switch ((i / kPalette.size()) % 4) {
    case 1:
      tag = "rect";
      shape = "x=\"" + svg_px(x - r) + "\" y=\"" + svg_px(y - r) + "\" width=\"" + svg_px(2 * r) +
              "\" height=\"" + svg_px(2 * r) + "\"";
      break;
    case 2:
      tag = "polygon";
      shape = "points=\"" + svg_px(x) + "," + svg_px(y - 1.2 * r) + " " + svg_px(x - 1.1 * r) +
              "," + svg_px(y + 0.8 * r) + " " + svg_px(x + 1.1 * r) + "," + svg_px(y + 0.8 * r) +
              "\"";
      break;
    case 3:
      tag = "polygon";
      shape = "points=\"" + svg_px(x) + "," + svg_px(y - 1.3 * r) + " " + svg_px(x + 1.3 * r) +
              "," + svg_px(y) + " " + svg_px(x) + "," + svg_px(y + 1.3 * r) + " " +
              svg_px(x - 1.3 * r) + "," + svg_px(y) + "\"";
      break;
    default:
      tag = "circle";
      shape = "cx=\"" + svg_px(x) + "\" cy=\"" + svg_px(y) + "\" r=\"" + svg_px(r) + "\"";
  }
  const std::string open = "<" + tag + " " + shape + attributes;
  return (inner.empty() ? open + "/>" : open + ">" + inner + "</" + tag + ">") + "\n";
}

std::string line_style(size_t i, const std::string& stroke) {
  std::string s = "stroke=\"" + stroke + "\"";
  if (i >= kPalette.size()) s += " stroke-dasharray=\"6 3\"";
  return s;
}

// The legend's entries stand kLegendStep apart, the first at the plot's top + 8.
constexpr double kLegendStep = 17;

std::string legend(const Axes& a, const std::vector<ChartSeries>& series, bool lines) {
  std::string s;
  const double x = a.left + a.width + 16;
  double y = a.top + 8;
  for (size_t i = 0; i < series.size(); ++i, y += kLegendStep) {
    if (lines)
      s += line(x, y, x + 22, y, "stroke-width=\"2\" " + line_style(i, series_colour(series, i)));
    else
      s += marker(i, series_colour(series, i), x + 11, y, 4.5);
    s += svg_text(x + 28, y + 4, series[i].name, 12, "class=\"legend\"");
  }
  return s;
}

double legend_width(const std::vector<ChartSeries>& series) {
  double w = 0;
  for (const auto& s : series) w = std::max(w, svg_text_width(s.name, 12));
  return w + 60;
}

// A chart's elements (no <svg> element) and its size.
struct Body {
  std::string svg;
  double width = 0, height = 0;
};

Body frame(Axes& a, const std::string& title, const std::string& x_label,
           const std::string& y_label, const std::vector<ChartSeries>& series) {
  const bool has_data = fit_axes(a, series);
  Body b;
  b.width = a.left + a.width + legend_width(series);
  // Tall enough for the axis label below the plot and for every legend entry (a study has more
  // mixers than the plot's height holds).
  const double legend_bottom = a.top + 8 + kLegendStep * static_cast<double>(series.size());
  b.height = std::max(a.top + a.height + 52, legend_bottom + 8);
  b.svg = draw_axes(a, title, x_label, y_label, has_data);
  return b;
}

Body line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                const std::vector<ChartSeries>& series, bool log_y) {
  Axes a;
  a.log_y = log_y;
  Body b = frame(a, title, x_label, y_label, series);
  for (size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& c = series[i];
    check(c.x.size() == c.y.size(), "chart '", title, "': series '", c.name, "' has ", c.x.size(),
          " x values and ", c.y.size(), " y values");
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        b.svg += "<polyline fill=\"none\" stroke-width=\"1.8\" " +
                 line_style(i, series_colour(series, i)) + " points=\"" + points + "\"/>\n";
      points.clear();
    };
    for (size_t k = 0; k < c.x.size(); ++k) {
      if (!drawable(a, c.x[k], c.y[k])) {
        flush();
        continue;
      }
      const double x = a.fx(c.x[k]), y = a.fy(c.y[k]);
      points += svg_px(x) + "," + svg_px(y) + " ";
      if (c.x.size() <= 12) b.svg += marker(i, series_colour(series, i), x, y, 3);
    }
    flush();
  }
  b.svg += legend(a, series, true);
  return b;
}

// A label's box, for keeping labels apart.
struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

Body scatter(const std::string& title, const std::string& x_label, const std::string& y_label,
             const std::vector<ChartSeries>& series, bool log_x) {
  Axes a;
  a.log_x = log_x;
  Body b = frame(a, title, x_label, y_label, series);
  struct Point {
    size_t series;
    double x, y;
  };
  std::vector<Point> points;
  for (size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& c = series[i];
    check(c.x.size() == c.y.size(), "chart '", title, "': series '", c.name, "' has ", c.x.size(),
          " x values and ", c.y.size(), " y values");
    for (size_t k = 0; k < c.x.size(); ++k) {
      if (!drawable(a, c.x[k], c.y[k])) continue;
      const double x = a.fx(c.x[k]), y = a.fy(c.y[k]);
      if (k < c.y_err.size() && std::isfinite(c.y_err[k]) && c.y_err[k] > 0)
        b.svg += line(x, a.fy(c.y[k] - c.y_err[k]), x, a.fy(c.y[k] + c.y_err[k]),
                      "stroke=\"" + series_colour(series, i) + "\"");
      b.svg += marker(i, series_colour(series, i), x, y, 5, "fill-opacity=\"0.85\"",
                      "<title>" + xml_escape(c.name) + "</title>");
      points.push_back({i, x, y});
    }
  }
  // Direct labels, first come first placed: beside the point where the label stays inside the
  // plot and clear of every point and label placed so far; else the legend names it.
  std::vector<Box> taken;
  for (const Point& p : points) taken.push_back({p.x - 5, p.y - 5, p.x + 5, p.y + 5});
  for (const Point& p : points) {
    const std::string& name = series[p.series].name;
    const double w = svg_text_width(name, 10), h = 10;
    const std::array<std::pair<double, double>, 6> offsets = {
        {{7, -4}, {7, 10}, {-7 - w, -4}, {-7 - w, 10}, {-w / 2, -9}, {-w / 2, 17}}};
    for (const auto& [dx, dy] : offsets) {
      const Box box{p.x + dx, p.y + dy - h, p.x + dx + w, p.y + dy + 2};
      const bool inside = box.x0 >= a.left && box.x1 <= a.left + a.width && box.y0 >= a.top &&
                          box.y1 <= a.top + a.height;
      if (!inside ||
          std::any_of(taken.begin(), taken.end(), [&](const Box& t) { return t.overlaps(box); }))
        continue;
      b.svg += svg_text(box.x0, p.y + dy, name, 10, "class=\"point-label\" fill=\"#333\"");
      taken.push_back(box);
      break;
    }
  }
  b.svg += legend(a, series, false);
  return b;
}

std::string whole(const Body& b) { return svg_open(b.width, b.height) + b.svg + "</svg>\n"; }

// One series per phase (train, valid, test, then any other, in first-seen order) with a finite
// value of `value(row)`.
template <typename Value>
std::vector<ChartSeries> phase_series(const MetricsTable& table, const std::string& what,
                                      Value value) {
  std::vector<std::string> phases = {"train", "valid", "test"};
  for (const auto& row : table.rows)
    if (std::find(phases.begin(), phases.end(), row.phase) == phases.end())
      phases.push_back(row.phase);
  std::vector<ChartSeries> out;
  for (size_t p = 0; p < phases.size(); ++p) {
    const std::string& phase = phases[p];
    ChartSeries s;
    s.name = phase + " " + what;
    s.colour = colour(p);  // by phase, so that valid has one colour in both panels
    for (const auto& row : table.rows) {
      const double v = row.phase == phase ? value(row) : NAN;
      if (!std::isfinite(v)) continue;
      s.x.push_back(static_cast<double>(row.step));
      s.y.push_back(v);
    }
    if (!s.x.empty()) out.push_back(std::move(s));
  }
  return out;
}

double column_value(const MetricsRow& row, const std::string& column) {
  const auto it = row.values.find(column);
  return it == row.values.end() ? NAN : it->second;
}

bool is_metric_column(const std::string& name) {
  if (name.rfind("loss", 0) == 0 || name == "lr") return false;
  for (const char* word : {"/s", "time", "norm", "elapsed"})
    if (name.find(word) != std::string::npos) return false;
  return true;
}

}  // namespace

std::string line_chart_svg(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<ChartSeries>& series,
                           bool log_y) {
  return whole(line_chart(title, x_label, y_label, series, log_y));
}

std::string scatter_svg(const std::string& title, const std::string& x_label,
                        const std::string& y_label, const std::vector<ChartSeries>& series,
                        bool log_x) {
  return whole(scatter(title, x_label, y_label, series, log_x));
}

double row_loss(const MetricsRow& row) {
  if (const auto it = row.values.find("loss"); it != row.values.end()) return it->second;
  // A train row holds its loss as the mean over its log window (train/loop/trainer.h).
  if (const auto it = row.values.find(kTrainLossColumn); it != row.values.end()) return it->second;
  return NAN;
}

std::string training_curves_svg(const MetricsTable& table, const std::string& title,
                                const std::string& primary_metric) {
  std::string metric = primary_metric;
  if (metric.empty()) {
    for (const auto& column : table.columns) {
      if (!is_metric_column(column)) continue;
      const bool in_valid = std::any_of(table.rows.begin(), table.rows.end(), [&](const auto& r) {
        return r.phase == "valid" && std::isfinite(column_value(r, column));
      });
      if (in_valid) {
        metric = column;
        break;
      }
    }
  } else {
    check(std::find(table.columns.begin(), table.columns.end(), metric) != table.columns.end(),
          title, ": no column '", metric, "' to plot");
  }
  // The best checkpoint, as the trainer chooses it: the valid row with the highest primary metric
  // (the lowest loss when there is none), a tie going to the lower loss and then to the later
  // step; marked in both panels.
  auto score = [&](const MetricsRow& r) {
    return metric.empty() ? -row_loss(r) : column_value(r, metric);
  };
  auto better = [&](const MetricsRow& r, const MetricsRow& b) {
    if (score(r) != score(b)) return score(r) > score(b);
    return !(row_loss(r) > row_loss(b));  // rows come in step order: the later wins a full tie
  };
  const MetricsRow* best = nullptr;
  for (const auto& row : table.rows)
    if (row.phase == "valid" && std::isfinite(score(row)) &&
        (best == nullptr || better(row, *best)))
      best = &row;
  auto with_best = [&](std::vector<ChartSeries> series, double value) {
    if (best != nullptr && std::isfinite(value))
      series.push_back({"best checkpoint (step " + std::to_string(best->step) + ")",
                        {static_cast<double>(best->step)},
                        {value},
                        {},
                        "#000000"});
    return series;
  };
  std::vector<ChartSeries> loss = phase_series(table, "loss", row_loss);
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : loss)
    for (double y : s.y) lo = std::min(lo, y), hi = std::max(hi, y);
  const bool log_loss = lo > 0 && hi / lo > 100;  // late progress stays visible
  const std::string prefix = title.empty() ? "" : title + ": ";
  std::vector<Body> panels;
  panels.push_back(line_chart(prefix + "loss", "step", "loss",
                              with_best(std::move(loss), best ? row_loss(*best) : NAN), log_loss));
  if (!metric.empty())
    panels.push_back(line_chart(
        prefix + metric, "step", metric,
        with_best(phase_series(table, metric,
                               [&](const MetricsRow& r) { return column_value(r, metric); }),
                  best ? column_value(*best, metric) : NAN),
        false));
  double width = 0, height = 0;
  for (const Body& p : panels) width = std::max(width, p.width), height += p.height;
  std::string s = svg_open(width, height);
  double y = 0;
  for (const Body& p : panels) {
    s += "<g transform=\"translate(0," + svg_px(y) + ")\">\n" + p.svg + "</g>\n";
    y += p.height;
  }
  return s + "</svg>\n";
}

std::string write_run_curves(const std::string& out_dir, const std::string& primary_metric) {
  const std::string path = out_dir + "/curves.svg";
  const std::string name = std::filesystem::path(out_dir).filename().string();
  write_file_atomically(
      path, std::string_view(training_curves_svg(read_metrics_csv(out_dir + "/metrics.csv"), name,
                                                 primary_metric)));
  return path;
}

}  // namespace mixlab::lab
