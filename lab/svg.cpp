#include "lab/svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

// Header-only stb, private to this file: the image of a patch-attention
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

}  // namespace

std::string svg_number(double v, int precision) {
  if (!std::isfinite(v)) return "nan";
  char buf[32];
  if (std::abs(v) >= 1000 && std::abs(v) < 1e7) {  // 1580, not 1.58e+03
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

std::string svg_px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string svg_open(double width, double height) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" "
         "xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"" +
         svg_px(width) + "\" height=\"" + svg_px(height) + "\" viewBox=\"0 0 " + svg_px(width) +
         " " + svg_px(height) + "\" font-family=\"" + kFont +
         "\">\n<rect width=\"100%\" height=\"100%\" " + "fill=\"white\"/>\n";
}

std::string svg_text(double x, double y, const std::string& s, double size,
                     const std::string& extra) {
  return "<text x=\"" + svg_px(x) + "\" y=\"" + svg_px(y) + "\" font-size=\"" + svg_px(size) +
         "\" " + extra + ">" + xml_escape(s) + "</text>\n";
}

// Width of a label in a proportional font, roughly (0.6 em per character, counting UTF-8 code
// points, not bytes).
double svg_text_width(const std::string& s, double size) {
  size_t points = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++points;
  return 0.6 * size * static_cast<double>(points);
}

std::vector<double> nice_ticks(double lo, double hi, int wanted) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  const double span = hi - lo;
  if (!(span > 0)) return {lo};
  const double raw = span / std::max(wanted, 2), mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = mag * (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10);
  std::vector<double> out;
  // Integer multiples of the step, so that 0.1 + 0.2 never prints as 0.30000000000000004.
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + 1e-9 * span; ++k)
    out.push_back(k == 0 ? 0.0 : k * step);
  return out;
}

std::string tick_label(double value, double step) {
  if (!std::isfinite(value)) return "nan";
  if (value == 0) return "0";
  const double a = std::abs(value);
  char buf[40];
  if (a >= 1e7 || a < 1e-4) {  // far from 1: scientific, with as many digits as the step needs
    const int digits =
        std::isfinite(step) && step > 0
            ? std::clamp(static_cast<int>(std::floor(std::log10(a)) - std::floor(std::log10(step))),
                         0, 6)
            : 2;
    std::snprintf(buf, sizeof buf, "%.*e", digits, value);
    return buf;
  }
  const int decimals = std::isfinite(step) && step > 0 && step < 1
                           ? std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 8)
                           : 0;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

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
    row_w = std::max(row_w, svg_text_width(label(m.row_labels, i), font));
  for (int64_t j = 0; j < m.cols; ++j)
    col_h = std::max(col_h, svg_text_width(label(m.col_labels, j), font));
  double grid_w = cell * m.cols, grid_h = cell * m.rows;
  double left = row_w + 34, top = 62;
  double bar_x = left + grid_w + 24, bar_h = std::max(grid_h, 140.0);
  double width = std::max(
      bar_x + 90, std::max(svg_text_width(m.title, 16), svg_text_width(m.subtitle, 11)) + 24);
  double height = top + std::max(grid_h + col_h * 0.8 + 44, bar_h + 20);

  double lo = INFINITY, hi = -INFINITY;
  for (double v : m.values)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  double span = hi > lo ? hi - lo : 1.0;

  std::string s = svg_open(width, height);
  s += svg_text(12, 22, m.title, 16, "font-weight=\"bold\"");
  s += svg_text(12, 40, m.subtitle, 11, "fill=\"#444\"");
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j) {
      double v = m.values[i * m.cols + j];
      s += "<rect x=\"" + svg_px(left + j * cell) + "\" y=\"" + svg_px(top + i * cell) +
           "\" width=\"" + svg_px(cell + 0.3) + "\" height=\"" + svg_px(cell + 0.3) + "\" fill=\"" +
           (std::isfinite(v) ? viridis((v - lo) / span) : std::string("#ff00ff")) + "\"><title>" +
           xml_escape(label(m.row_labels, i) + " → " + label(m.col_labels, j)) + ": " +
           svg_number(v, 5) + "</title></rect>\n";
    }
  for (int64_t i = 0; i < m.rows; ++i)
    s += svg_text(left - 4, top + (i + 0.5) * cell + font * 0.35, label(m.row_labels, i), font,
                  "text-anchor=\"end\"");
  for (int64_t j = 0; j < m.cols; ++j) {
    double x = left + (j + 0.5) * cell + font * 0.35, y = top + grid_h + 5;
    s += "<text transform=\"translate(" + svg_px(x) + "," + svg_px(y) +
         ") rotate(-60)\" text-anchor=\"end\" font-size=\"" + svg_px(font) + "\">" +
         xml_escape(label(m.col_labels, j)) + "</text>\n";
  }
  // Axis names: rows on the left, columns under their labels.
  s += "<text transform=\"translate(12," + svg_px(top + grid_h / 2) +
       ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\" fill=\"#444\">" +
       xml_escape(m.row_axis) + "</text>\n";
  s += svg_text(left + grid_w / 2, top + grid_h + col_h * 0.87 + 28, m.col_axis, 12,
                "text-anchor=\"middle\" fill=\"#444\"");
  // The colour bar: a vertical gradient (top = max) with five values.
  s += "<defs><linearGradient id=\"bar\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k)
    s += "<stop offset=\"" + svg_number(k / 10.0) + "\" stop-color=\"" + viridis(k / 10.0) + "\"/>";
  s += "</linearGradient></defs>\n";
  s += "<rect x=\"" + svg_px(bar_x) + "\" y=\"" + svg_px(top) + "\" width=\"16\" height=\"" +
       svg_px(bar_h) + "\" fill=\"url(#bar)\" stroke=\"#444\" stroke-width=\"0.5\"/>\n";
  const std::vector<double> bar_ticks = nice_ticks(lo, hi);
  const double bar_step = bar_ticks.size() > 1 ? bar_ticks[1] - bar_ticks[0] : 0;
  for (double v : bar_ticks) {
    double y = top + bar_h - bar_h * (v - lo) / span;
    s += "<line x1=\"" + svg_px(bar_x + 16) + "\" y1=\"" + svg_px(y) + "\" x2=\"" +
         svg_px(bar_x + 20) + "\" y2=\"" + svg_px(y) + "\" stroke=\"#444\"/>\n";
    s += svg_text(bar_x + 23, y + 4, tick_label(v, bar_step), 11, "class=\"tick-y\"");
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
  width = std::max({width, svg_text_width(title, 15) + 24, svg_text_width(note, 11) + 24});
  std::string s = svg_open(width, height);
  s += svg_text(12, 22, title, 15, "font-weight=\"bold\"");
  s += svg_text(12, 40, note, 11, "fill=\"#444\"");
  s += "<defs><image id=\"img\" width=\"" + std::to_string(side) + "\" height=\"" +
       std::to_string(side) +
       "\" style=\"image-rendering:pixelated\" xlink:href=\"data:image/png;base64," +
       base64(gray_png(gray, side)) + "\"/></defs>\n";
  for (int64_t q = 0; q < n; ++q) {
    double x = 12 + (q % columns) * (thumb + 8), y = 52 + (q / columns) * (thumb + gap);
    s += "<g transform=\"translate(" + svg_px(x) + "," + svg_px(y) + ") scale(" +
         svg_number(scale) + ")\">";
    s += "<use xlink:href=\"#img\"/>";
    double peak = 0;
    for (double w : weights[q]) peak = std::max(peak, std::abs(w));
    if (peak <= 0) peak = 1;
    for (int64_t k = 0; k < n; ++k) {
      double w = std::abs(weights[q][k]) / peak;
      s += "<rect x=\"" + std::to_string((k % per_side) * patch) + "\" y=\"" +
           std::to_string((k / per_side) * patch) + "\" width=\"" + std::to_string(patch) +
           "\" height=\"" + std::to_string(patch) + "\" fill=\"" + viridis(w) +
           "\" fill-opacity=\"" + svg_number(0.15 + 0.6 * w) + "\"/>";
    }
    s += "<rect x=\"" + std::to_string((q % per_side) * patch) + "\" y=\"" +
         std::to_string((q / per_side) * patch) + "\" width=\"" + std::to_string(patch) +
         "\" height=\"" + std::to_string(patch) +
         "\" fill=\"none\" stroke=\"red\" stroke-width=\"0.6\"/></g>\n";
    s += svg_text(x, y + thumb + 12, "patch " + std::to_string(q), 10);
  }
  return s + "</svg>\n";
}

}  // namespace mixlab::lab
