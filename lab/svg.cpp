#include "lab/svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

// Header-only stb, private to this file (as in io/plot.cpp): the image of a patch-attention
// picture is embedded in its SVG as a PNG data URI.
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace mixlab::lab {

namespace {

constexpr const char* kFont = "DejaVu Sans, Verdana, Arial, sans-serif";

// matplotlib's viridis at t = 0, 0.1, ..., 1; interpolated linearly between them.
constexpr std::array<std::array<int, 3>, 11> kViridis = {{{68, 1, 84},
                                                          {72, 36, 117},
                                                          {65, 68, 135},
                                                          {53, 95, 141},
                                                          {42, 120, 142},
                                                          {33, 145, 140},
                                                          {34, 168, 132},
                                                          {68, 191, 112},
                                                          {122, 209, 81},
                                                          {189, 223, 38},
                                                          {253, 231, 37}}};

// Ten distinct line colours (matplotlib's tab10); series past ten are dashed.
constexpr std::array<const char*, 10> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                  "#bcbd22", "#17becf"};

std::string num(double v, int precision = 3) {
  if (!std::isfinite(v)) return "nan";
  char buf[32];
  if (std::abs(v) >= 1000 && std::abs(v) < 1e7) {  // 1580, not 1.58e+03
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string svg_open(double width, double height) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" "
         "xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"" +
         px(width) + "\" height=\"" + px(height) + "\" viewBox=\"0 0 " + px(width) + " " +
         px(height) + "\" font-family=\"" + kFont + "\">\n<rect width=\"100%\" height=\"100%\" " +
         "fill=\"white\"/>\n";
}

std::string text(double x, double y, const std::string& s, double size,
                 const std::string& extra = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" font-size=\"" + px(size) + "\" " + extra +
         ">" + xml_escape(s) + "</text>\n";
}

// Width of a label in a proportional font, roughly (0.6 em per character, counting UTF-8 code
// points, not bytes).
double text_width(const std::string& s, double size) {
  size_t points = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++points;
  return 0.6 * size * static_cast<double>(points);
}

std::string base64(const std::vector<uint8_t>& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = bytes[i] << 16;
    if (i + 1 < bytes.size()) v |= bytes[i + 1] << 8;
    if (i + 2 < bytes.size()) v |= bytes[i + 2];
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? table[v & 63] : '=';
  }
  return out;
}

std::vector<uint8_t> gray_png(const std::vector<uint8_t>& gray, int side) {
  std::vector<uint8_t> out;
  int ok = stbi_write_png_to_func(
      [](void* context, void* data, int size) {
        auto* v = static_cast<std::vector<uint8_t>*>(context);
        auto* p = static_cast<uint8_t*>(data);
        v->insert(v->end(), p, p + size);
      },
      &out, side, side, 1, gray.data(), side);
  check(ok != 0, "could not encode the image as PNG");
  return out;
}

// "Nice" tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten.
std::vector<double> ticks(double lo, double hi, int wanted = 5) {
  double span = hi - lo;
  if (!(span > 0)) return {lo};
  double raw = span / wanted, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * (raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10);
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * span; t += step)
    out.push_back(std::abs(t) < 1e-12 * span ? 0.0 : t);
  return out;
}

// The frame of a chart: plot area, grid, ticks and labels; maps data to pixels.
struct Axes {
  double left = 70, top = 44, width = 520, height = 320;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_x = false, log_y = false;
  double fx(double x) const {
    double v = log_x ? std::log10(x) : x;
    return left + (v - x0) / (x1 - x0) * width;
  }
  double fy(double y) const {
    double v = log_y ? std::log10(y) : y;
    return top + height - (v - y0) / (y1 - y0) * height;
  }
};

void widen(double& lo, double& hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) lo -= 0.5, hi += 0.5;
}

// Data ranges of every finite point (positive only on a log axis).
void fit_axes(Axes& a, const std::vector<ChartSeries>& series) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      double x = s.x[i], y = s.y[i];
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if ((a.log_x && x <= 0) || (a.log_y && y <= 0)) continue;
      double e = i < s.y_err.size() && std::isfinite(s.y_err[i]) ? s.y_err[i] : 0.0;
      x = a.log_x ? std::log10(x) : x;
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      y0 = std::min(y0, a.log_y ? std::log10(y) : y - e);
      y1 = std::max(y1, a.log_y ? std::log10(y) : y + e);
    }
  widen(x0, x1);
  widen(y0, y1);
  double padx = 0.04 * (x1 - x0), pady = 0.06 * (y1 - y0);
  a.x0 = x0 - padx, a.x1 = x1 + padx, a.y0 = y0 - pady, a.y1 = y1 + pady;
}

std::string draw_axes(const Axes& a, const std::string& title, const std::string& x_label,
                      const std::string& y_label) {
  std::string s;
  s += text(a.left, 24, title, 16, "font-weight=\"bold\"");
  s += "<rect x=\"" + px(a.left) + "\" y=\"" + px(a.top) + "\" width=\"" + px(a.width) +
       "\" height=\"" + px(a.height) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  auto axis_ticks = [&](double lo, double hi, bool log, bool is_x) {
    std::vector<double> at = ticks(lo, hi);
    if (log) {  // 1, 2 and 5 times the powers of ten inside the range
      at.clear();
      for (double e = std::floor(lo); e <= hi; ++e)
        for (double m : {1.0, 2.0, 5.0})
          if (double t = e + std::log10(m); t >= lo && t <= hi) at.push_back(t);
    }
    for (double t : at) {
      double value = log ? std::pow(10.0, t) : t;
      if (is_x) {
        double x = a.left + (t - a.x0) / (a.x1 - a.x0) * a.width;
        s += "<line x1=\"" + px(x) + "\" y1=\"" + px(a.top) + "\" x2=\"" + px(x) + "\" y2=\"" +
             px(a.top + a.height) + "\" stroke=\"#e4e4e4\"/>\n";
        s += text(x, a.top + a.height + 16, num(value), 11, "text-anchor=\"middle\"");
      } else {
        double y = a.top + a.height - (t - a.y0) / (a.y1 - a.y0) * a.height;
        s += "<line x1=\"" + px(a.left) + "\" y1=\"" + px(y) + "\" x2=\"" + px(a.left + a.width) +
             "\" y2=\"" + px(y) + "\" stroke=\"#e4e4e4\"/>\n";
        s += text(a.left - 6, y + 4, num(value), 11, "text-anchor=\"end\"");
      }
    }
  };
  axis_ticks(a.x0, a.x1, a.log_x, true);
  axis_ticks(a.y0, a.y1, a.log_y, false);
  s += text(a.left + a.width / 2, a.top + a.height + 36, x_label + (a.log_x ? " (log scale)" : ""),
            12, "text-anchor=\"middle\"");
  s += "<text transform=\"translate(16," + px(a.top + a.height / 2) +
       ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">" +
       xml_escape(y_label + (a.log_y ? " (log scale)" : "")) + "</text>\n";
  return s;
}

std::string series_style(size_t i) {
  std::string s = std::string("stroke=\"") + kPalette[i % kPalette.size()] + "\"";
  if (i >= kPalette.size()) s += " stroke-dasharray=\"6 3\"";
  return s;
}

std::string legend(const Axes& a, const std::vector<ChartSeries>& series, bool lines) {
  std::string s;
  double x = a.left + a.width + 16, y = a.top + 8;
  for (size_t i = 0; i < series.size(); ++i, y += 17) {
    const char* colour = kPalette[i % kPalette.size()];
    if (lines)
      s += "<line x1=\"" + px(x) + "\" y1=\"" + px(y) + "\" x2=\"" + px(x + 22) + "\" y2=\"" +
           px(y) + "\" stroke-width=\"2\" " + series_style(i) + "/>\n";
    else
      s += "<circle cx=\"" + px(x + 11) + "\" cy=\"" + px(y) + "\" r=\"4.5\" fill=\"" + colour +
           "\"/>\n";
    s += text(x + 28, y + 4, series[i].name, 12);
  }
  return s;
}

double legend_width(const std::vector<ChartSeries>& series) {
  double w = 0;
  for (const auto& s : series) w = std::max(w, text_width(s.name, 12));
  return w + 60;
}

// The SVG's opening, the fitted axes and their labels: the start of every chart.
std::string chart_frame(Axes& a, const std::string& title, const std::string& x_label,
                        const std::string& y_label, const std::vector<ChartSeries>& series) {
  fit_axes(a, series);
  return svg_open(a.left + a.width + legend_width(series), a.top + a.height + 52) +
         draw_axes(a, title, x_label, y_label);
}

}  // namespace

std::string viridis(double t) {
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * 10.0;
  int i = std::min(9, static_cast<int>(t));
  double f = t - i;
  char buf[8];
  int c[3];
  for (int k = 0; k < 3; ++k)
    c[k] =
        static_cast<int>(std::lround(kViridis[i][k] + f * (kViridis[i + 1][k] - kViridis[i][k])));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string heatmap_svg(const Heatmap& m) {
  check(m.rows > 0 && m.cols > 0 && static_cast<int64_t>(m.values.size()) == m.rows * m.cols,
        "heatmap '", m.title, "': ", m.values.size(), " values for ", m.rows, " x ", m.cols);
  double cell = std::clamp(560.0 / static_cast<double>(std::max(m.rows, m.cols)), 10.0, 34.0);
  double font = std::clamp(cell * 0.8, 8.5, 13.0);
  auto label = [](const std::vector<std::string>& labels, int64_t i) {
    return i < static_cast<int64_t>(labels.size()) ? labels[i] : std::to_string(i);
  };
  double row_w = 0, col_h = 0;
  for (int64_t i = 0; i < m.rows; ++i)
    row_w = std::max(row_w, text_width(label(m.row_labels, i), font));
  for (int64_t j = 0; j < m.cols; ++j)
    col_h = std::max(col_h, text_width(label(m.col_labels, j), font));
  double grid_w = cell * m.cols, grid_h = cell * m.rows;
  double left = row_w + 34, top = 62;
  double bar_x = left + grid_w + 24, bar_h = std::max(grid_h, 140.0);
  double width =
      std::max(bar_x + 90, std::max(text_width(m.title, 16), text_width(m.subtitle, 11)) + 24);
  double height = top + std::max(grid_h + col_h * 0.8 + 44, bar_h + 20);

  double lo = INFINITY, hi = -INFINITY;
  for (double v : m.values)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  double span = hi > lo ? hi - lo : 1.0;

  std::string s = svg_open(width, height);
  s += text(12, 22, m.title, 16, "font-weight=\"bold\"");
  s += text(12, 40, m.subtitle, 11, "fill=\"#444\"");
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j) {
      double v = m.values[i * m.cols + j];
      s += "<rect x=\"" + px(left + j * cell) + "\" y=\"" + px(top + i * cell) + "\" width=\"" +
           px(cell + 0.3) + "\" height=\"" + px(cell + 0.3) + "\" fill=\"" +
           (std::isfinite(v) ? viridis((v - lo) / span) : std::string("#ff00ff")) + "\"><title>" +
           xml_escape(label(m.row_labels, i) + " → " + label(m.col_labels, j)) + ": " + num(v, 5) +
           "</title></rect>\n";
    }
  for (int64_t i = 0; i < m.rows; ++i)
    s += text(left - 4, top + (i + 0.5) * cell + font * 0.35, label(m.row_labels, i), font,
              "text-anchor=\"end\"");
  for (int64_t j = 0; j < m.cols; ++j) {
    double x = left + (j + 0.5) * cell + font * 0.35, y = top + grid_h + 5;
    s += "<text transform=\"translate(" + px(x) + "," + px(y) +
         ") rotate(-60)\" text-anchor=\"end\" font-size=\"" + px(font) + "\">" +
         xml_escape(label(m.col_labels, j)) + "</text>\n";
  }
  // Axis names: rows on the left, columns under their labels.
  s += "<text transform=\"translate(12," + px(top + grid_h / 2) +
       ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\" fill=\"#444\">" +
       xml_escape(m.row_axis) + "</text>\n";
  s += text(left + grid_w / 2, top + grid_h + col_h * 0.87 + 28, m.col_axis, 12,
            "text-anchor=\"middle\" fill=\"#444\"");
  // The colour bar: a vertical gradient (top = max) with five values.
  s += "<defs><linearGradient id=\"bar\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k)
    s += "<stop offset=\"" + num(k / 10.0) + "\" stop-color=\"" + viridis(k / 10.0) + "\"/>";
  s += "</linearGradient></defs>\n";
  s += "<rect x=\"" + px(bar_x) + "\" y=\"" + px(top) + "\" width=\"16\" height=\"" + px(bar_h) +
       "\" fill=\"url(#bar)\" stroke=\"#444\" stroke-width=\"0.5\"/>\n";
  for (double v : ticks(lo, hi)) {
    double y = top + bar_h - bar_h * (v - lo) / span;
    s += "<line x1=\"" + px(bar_x + 16) + "\" y1=\"" + px(y) + "\" x2=\"" + px(bar_x + 20) +
         "\" y2=\"" + px(y) + "\" stroke=\"#444\"/>\n";
    s += text(bar_x + 23, y + 4, num(v), 11);
  }
  return s + "</svg>\n";
}

std::string patch_attention_svg(const std::string& title, const std::vector<uint8_t>& gray,
                                int side, int patch,
                                const std::vector<std::vector<double>>& weights) {
  int per_side = side / patch;
  int64_t n = static_cast<int64_t>(weights.size());
  check(n == static_cast<int64_t>(per_side) * per_side && gray.size() == size_t(side) * side,
        "patch_attention_svg: ", n, " query patches for a ", side, "x", side, " image of ", patch,
        "x", patch, " patches");
  const double scale = 3.0, thumb = side * scale, gap = 18;
  int columns = std::min<int>(per_side, 8);
  int64_t rows = (n + columns - 1) / columns;
  double width = columns * (thumb + 8) + 24, height = 52 + rows * (thumb + gap);
  const std::string note =
      "red frame: the query patch; tint: the weight it gives each patch (yellow = its largest)";
  width = std::max({width, text_width(title, 15) + 24, text_width(note, 11) + 24});
  std::string s = svg_open(width, height);
  s += text(12, 22, title, 15, "font-weight=\"bold\"");
  s += text(12, 40, note, 11, "fill=\"#444\"");
  s += "<defs><image id=\"img\" width=\"" + std::to_string(side) + "\" height=\"" +
       std::to_string(side) +
       "\" style=\"image-rendering:pixelated\" xlink:href=\"data:image/png;base64," +
       base64(gray_png(gray, side)) + "\"/></defs>\n";
  for (int64_t q = 0; q < n; ++q) {
    double x = 12 + (q % columns) * (thumb + 8), y = 52 + (q / columns) * (thumb + gap);
    s += "<g transform=\"translate(" + px(x) + "," + px(y) + ") scale(" + num(scale) + ")\">";
    s += "<use xlink:href=\"#img\"/>";
    double peak = 0;
    for (double w : weights[q]) peak = std::max(peak, std::abs(w));
    if (peak <= 0) peak = 1;
    for (int64_t k = 0; k < n; ++k) {
      double w = std::abs(weights[q][k]) / peak;
      s += "<rect x=\"" + std::to_string((k % per_side) * patch) + "\" y=\"" +
           std::to_string((k / per_side) * patch) + "\" width=\"" + std::to_string(patch) +
           "\" height=\"" + std::to_string(patch) + "\" fill=\"" + viridis(w) +
           "\" fill-opacity=\"" + num(0.15 + 0.6 * w) + "\"/>";
    }
    s += "<rect x=\"" + std::to_string((q % per_side) * patch) + "\" y=\"" +
         std::to_string((q / per_side) * patch) + "\" width=\"" + std::to_string(patch) +
         "\" height=\"" + std::to_string(patch) +
         "\" fill=\"none\" stroke=\"red\" stroke-width=\"0.6\"/></g>\n";
    s += text(x, y + thumb + 12, "patch " + std::to_string(q), 10);
  }
  return s + "</svg>\n";
}

std::string line_chart_svg(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<ChartSeries>& series,
                           bool log_y) {
  Axes a;
  a.log_y = log_y;
  std::string s = chart_frame(a, title, x_label, y_label, series);
  for (size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& c = series[i];
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        s += "<polyline fill=\"none\" stroke-width=\"1.8\" " + series_style(i) + " points=\"" +
             points + "\"/>\n";
      points.clear();
    };
    for (size_t k = 0; k < c.x.size() && k < c.y.size(); ++k) {
      bool ok = std::isfinite(c.x[k]) && std::isfinite(c.y[k]) && (!log_y || c.y[k] > 0);
      if (!ok) {
        flush();
        continue;
      }
      points += px(a.fx(c.x[k])) + "," + px(a.fy(c.y[k])) + " ";
      if (c.x.size() <= 12)
        s += "<circle cx=\"" + px(a.fx(c.x[k])) + "\" cy=\"" + px(a.fy(c.y[k])) +
             "\" r=\"2.5\" fill=\"" + kPalette[i % kPalette.size()] + "\"/>\n";
    }
    flush();
  }
  s += legend(a, series, true);
  return s + "</svg>\n";
}

std::string scatter_svg(const std::string& title, const std::string& x_label,
                        const std::string& y_label, const std::vector<ChartSeries>& series,
                        bool log_x) {
  Axes a;
  a.log_x = log_x;
  std::string s = chart_frame(a, title, x_label, y_label, series);
  for (size_t i = 0; i < series.size(); ++i) {
    const ChartSeries& c = series[i];
    const char* colour = kPalette[i % kPalette.size()];
    for (size_t k = 0; k < c.x.size() && k < c.y.size(); ++k) {
      if (!std::isfinite(c.x[k]) || !std::isfinite(c.y[k]) || (log_x && c.x[k] <= 0)) continue;
      double x = a.fx(c.x[k]), y = a.fy(c.y[k]);
      if (k < c.y_err.size() && c.y_err[k] > 0)
        s += "<line x1=\"" + px(x) + "\" y1=\"" + px(a.fy(c.y[k] - c.y_err[k])) + "\" x2=\"" +
             px(x) + "\" y2=\"" + px(a.fy(c.y[k] + c.y_err[k])) + "\" stroke=\"" + colour +
             "\"/>\n";
      s += "<circle cx=\"" + px(x) + "\" cy=\"" + px(y) + "\" r=\"5\" fill=\"" + colour +
           "\" fill-opacity=\"0.85\"" + (i >= kPalette.size() ? " stroke=\"black\"" : "") +
           "><title>" + xml_escape(c.name) + "</title></circle>\n";
      s += text(x + 7, y - 6, c.name, 10, "fill=\"#333\"");
    }
  }
  s += legend(a, series, false);
  return s + "</svg>\n";
}

}  // namespace mixlab::lab
