#include "lab/plot.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <span>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/run_log.h"

// Header-only stb: STATIC keeps its symbols private to this file, so they cannot clash with
// Debian's libstb or another file that includes the implementation.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace mixlab::lab {

namespace {

// ---- 5x7 bitmap font ---------------------------------------------------------------------------
// Each glyph is 7 rows of 5 columns, '#' = ink. Enough for tick labels (digits, '.', '-', 'e'),
// titles and legend names.
constexpr int kGlyphW = 5, kGlyphH = 7;

struct Glyph {
  char c;
  const char* rows;  // 35 characters, row by row
};

// clang-format off
constexpr Glyph kFont[] = {
  {' ', "....." "....." "....." "....." "....." "....." "....."},
  {'0', ".###." "#...#" "#..##" "#.#.#" "##..#" "#...#" ".###."},
  {'1', "..#.." ".##.." "..#.." "..#.." "..#.." "..#.." ".###."},
  {'2', ".###." "#...#" "....#" "...#." "..#.." ".#..." "#####"},
  {'3', "#####" "...#." "..#.." "...#." "....#" "#...#" ".###."},
  {'4', "...#." "..##." ".#.#." "#..#." "#####" "...#." "...#."},
  {'5', "#####" "#...." "####." "....#" "....#" "#...#" ".###."},
  {'6', "..##." ".#..." "#...." "####." "#...#" "#...#" ".###."},
  {'7', "#####" "....#" "...#." "..#.." ".#..." ".#..." ".#..."},
  {'8', ".###." "#...#" "#...#" ".###." "#...#" "#...#" ".###."},
  {'9', ".###." "#...#" "#...#" ".####" "....#" "...#." ".##.."},
  {'A', ".###." "#...#" "#...#" "#####" "#...#" "#...#" "#...#"},
  {'B', "####." "#...#" "#...#" "####." "#...#" "#...#" "####."},
  {'C', ".###." "#...#" "#...." "#...." "#...." "#...#" ".###."},
  {'D', "###.." "#..#." "#...#" "#...#" "#...#" "#..#." "###.."},
  {'E', "#####" "#...." "#...." "####." "#...." "#...." "#####"},
  {'F', "#####" "#...." "#...." "####." "#...." "#...." "#...."},
  {'G', ".###." "#...#" "#...." "#.###" "#...#" "#...#" ".####"},
  {'H', "#...#" "#...#" "#...#" "#####" "#...#" "#...#" "#...#"},
  {'I', ".###." "..#.." "..#.." "..#.." "..#.." "..#.." ".###."},
  {'J', "..###" "...#." "...#." "...#." "...#." "#..#." ".##.."},
  {'K', "#...#" "#..#." "#.#.." "##..." "#.#.." "#..#." "#...#"},
  {'L', "#...." "#...." "#...." "#...." "#...." "#...." "#####"},
  {'M', "#...#" "##.##" "#.#.#" "#.#.#" "#...#" "#...#" "#...#"},
  {'N', "#...#" "#...#" "##..#" "#.#.#" "#..##" "#...#" "#...#"},
  {'O', ".###." "#...#" "#...#" "#...#" "#...#" "#...#" ".###."},
  {'P', "####." "#...#" "#...#" "####." "#...." "#...." "#...."},
  {'Q', ".###." "#...#" "#...#" "#...#" "#.#.#" "#..#." ".##.#"},
  {'R', "####." "#...#" "#...#" "####." "#.#.." "#..#." "#...#"},
  {'S', ".####" "#...." "#...." ".###." "....#" "....#" "####."},
  {'T', "#####" "..#.." "..#.." "..#.." "..#.." "..#.." "..#.."},
  {'U', "#...#" "#...#" "#...#" "#...#" "#...#" "#...#" ".###."},
  {'V', "#...#" "#...#" "#...#" "#...#" "#...#" ".#.#." "..#.."},
  {'W', "#...#" "#...#" "#...#" "#.#.#" "#.#.#" "#.#.#" ".#.#."},
  {'X', "#...#" "#...#" ".#.#." "..#.." ".#.#." "#...#" "#...#"},
  {'Y', "#...#" "#...#" ".#.#." "..#.." "..#.." "..#.." "..#.."},
  {'Z', "#####" "....#" "...#." "..#.." ".#..." "#...." "#####"},
  {'.', "....." "....." "....." "....." "....." ".##.." ".##.."},
  {',', "....." "....." "....." "....." ".##.." "..#.." ".#..."},
  {'-', "....." "....." "....." ".###." "....." "....." "....."},
  {'+', "....." "..#.." "..#.." "#####" "..#.." "..#.." "....."},
  {'=', "....." "....." "#####" "....." "#####" "....." "....."},
  {':', "....." ".##.." ".##.." "....." ".##.." ".##.." "....."},
  {'/', "....." "....#" "...#." "..#.." ".#..." "#...." "....."},
  {'_', "....." "....." "....." "....." "....." "....." "#####"},
  {'(', "...#." "..#.." ".#..." ".#..." ".#..." "..#.." "...#."},
  {')', ".#..." "..#.." "...#." "...#." "...#." "..#.." ".#..."},
  {'[', ".###." ".#..." ".#..." ".#..." ".#..." ".#..." ".###."},
  {']', ".###." "...#." "...#." "...#." "...#." "...#." ".###."},
  {'<', "...#." "..#.." ".#..." "#...." ".#..." "..#.." "...#."},
  {'>', ".#..." "..#.." "...#." "....#" "...#." "..#.." ".#..."},
  {'%', "##..." "##..#" "...#." "..#.." ".#..." "#..##" "...##"},
  {'#', ".#.#." ".#.#." "#####" ".#.#." "#####" ".#.#." ".#.#."},
  {'*', "....." "..#.." "#.#.#" ".###." "#.#.#" "..#.." "....."},
  {'!', "..#.." "..#.." "..#.." "..#.." "..#.." "....." "..#.."},
  {'\'', "..#.." "..#.." ".#..." "....." "....." "....." "....."},
  {'?', ".###." "#...#" "....#" "...#." "..#.." "....." "..#.."},
};
// clang-format on

const char* glyph_rows(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  for (const Glyph& g : kFont) {
    if (g.c == c) return g.rows;
  }
  return glyph_rows('?');
}

// ---- canvas -------------------------------------------------------------------------------------

struct Rect {
  int x0, y0, x1, y1;  // inclusive
  bool contains(int x, int y) const { return x >= x0 && x <= x1 && y >= y0 && y <= y1; }
};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), pixels_(static_cast<size_t>(w) * h * 3, 0xff) {}

  int width() const { return w_; }
  int height() const { return h_; }
  const std::vector<uint8_t>& pixels() const { return pixels_; }

  // Drawing outside the canvas or the clip rectangle is ignored.
  void set_clip(const Rect& r) { clip_ = r; }
  void clear_clip() { clip_ = Rect{0, 0, w_ - 1, h_ - 1}; }

  void set(int x, int y, uint32_t rgb) {
    if (!clip_.contains(x, y) || x < 0 || y < 0 || x >= w_ || y >= h_) return;
    uint8_t* p = &pixels_[(static_cast<size_t>(y) * w_ + x) * 3];
    p[0] = static_cast<uint8_t>(rgb >> 16);
    p[1] = static_cast<uint8_t>(rgb >> 8);
    p[2] = static_cast<uint8_t>(rgb);
  }

  void fill(const Rect& r, uint32_t rgb) {
    for (int y = r.y0; y <= r.y1; ++y)
      for (int x = r.x0; x <= r.x1; ++x) set(x, y, rgb);
  }

  void outline(const Rect& r, uint32_t rgb) {
    fill({r.x0, r.y0, r.x1, r.y0}, rgb);
    fill({r.x0, r.y1, r.x1, r.y1}, rgb);
    fill({r.x0, r.y0, r.x0, r.y1}, rgb);
    fill({r.x1, r.y0, r.x1, r.y1}, rgb);
  }

  // Bresenham with a 2x2 pen, so that lines stay visible without anti-aliasing.
  void line(int x0, int y0, int x1, int y1, uint32_t rgb) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    while (true) {
      fill({x0, y0, x0 + 1, y0 + 1}, rgb);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }

  // A filled disc; radius 2 marks the points of a sparse line, 3 an isolated point.
  void dot(int x, int y, int radius, uint32_t rgb) {
    for (int dy = -radius; dy <= radius; ++dy)
      for (int dx = -radius; dx <= radius; ++dx)
        if (dx * dx + dy * dy <= radius * radius + 1) set(x + dx, y + dy, rgb);
  }

  static int text_width(const std::string& text, int scale) {
    return text.empty() ? 0 : static_cast<int>(text.size()) * (kGlyphW + 1) * scale - scale;
  }
  static int text_height(int scale) { return kGlyphH * scale; }

  // (x, y) is the top-left corner of the first glyph.
  void text(int x, int y, const std::string& text, int scale, uint32_t rgb) {
    for (char c : text) {
      const char* rows = glyph_rows(c);
      for (int gy = 0; gy < kGlyphH; ++gy)
        for (int gx = 0; gx < kGlyphW; ++gx)
          if (rows[gy * kGlyphW + gx] == '#')
            fill({x + gx * scale, y + gy * scale, x + gx * scale + scale - 1,
                  y + gy * scale + scale - 1},
                 rgb);
      x += (kGlyphW + 1) * scale;
    }
  }

 private:
  int w_, h_;
  std::vector<uint8_t> pixels_;
  Rect clip_{0, 0, w_ - 1, h_ - 1};
};

// ---- axes ---------------------------------------------------------------------------------------

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  bool empty() const { return !(lo <= hi); }
  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
};

// Widens a zero-width range around its value (or makes [0, 1] of an empty one), then pads by
// `pad` of the width on each side so that extreme points and the end ticks' labels do not sit
// on the frame's corners.
Range finish_range(Range r, double pad) {
  if (r.empty()) {
    r = Range{0.0, 1.0};
  } else if (r.hi - r.lo <= 1e-12 * std::max(std::fabs(r.lo), std::fabs(r.hi))) {
    const double half = r.lo == 0 ? 1.0 : std::fabs(r.lo) * 0.1;
    r = Range{r.lo - half, r.hi + half};
  }
  const double margin = (r.hi - r.lo) * pad;
  return Range{r.lo - margin, r.hi + margin};
}

// A 1, 2 or 5 times a power of ten step giving about `target` intervals over the range.
double nice_step(double width, int target) {
  const double raw = width / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double factor = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return factor * magnitude;
}

std::vector<double> ticks_for(const Range& r, int target) {
  const double step = nice_step(r.hi - r.lo, target);
  std::vector<double> ticks;
  for (double k = std::ceil(r.lo / step); k * step <= r.hi + step * 1e-9; k += 1) {
    const double v = k * step;
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);  // no "-0"
  }
  return ticks;
}

// Short tick labels: fixed notation with just enough decimals for the step ("0.25", "1500"),
// or "2.5e-4" / "1.2e6" style when fixed notation would be long, with the same number of
// mantissa digits on every label of the axis.
std::vector<std::string> tick_labels(const std::vector<double>& ticks) {
  if (ticks.empty()) return {};
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : std::max(1.0, std::fabs(ticks[0]));
  const int step_exp = static_cast<int>(std::floor(std::log10(step) + 1e-9));
  double max_abs = 0;
  for (double t : ticks) max_abs = std::max(max_abs, std::fabs(t));
  auto exponent = [](double v) {
    return static_cast<int>(std::floor(std::log10(std::fabs(v)) + 1e-9));
  };
  const bool scientific = max_abs >= 1e6 || (step_exp < -3 && max_abs < 1e-2);
  int digits = 0;
  if (scientific) {
    for (double t : ticks)
      if (t != 0) digits = std::max(digits, exponent(t) - step_exp);
    digits = std::min(digits, 4);
  }
  std::vector<std::string> labels;
  char buffer[48];
  for (double t : ticks) {
    if (!scientific) {
      std::snprintf(buffer, sizeof buffer, "%.*f", std::max(0, -step_exp), t);
    } else if (t == 0) {
      std::snprintf(buffer, sizeof buffer, "0");
    } else {
      const int exp = exponent(t);
      std::snprintf(buffer, sizeof buffer, "%.*fe%d", digits, t / std::pow(10.0, exp), exp);
    }
    labels.push_back(buffer);
  }
  return labels;
}

constexpr uint32_t kBlack = 0x000000, kGrid = 0xe4e4e4, kFrame = 0x404040, kText = 0x202020;
constexpr int kTitleScale = 2, kLabelScale = 2, kLegendScale = 2;
constexpr size_t kDotThreshold = 60;  // series with at most this many finite points get dots

}  // namespace

uint32_t plot_color(size_t i) {
  // Tableau-like colours that stay distinct on white.
  static constexpr std::array<uint32_t, 8> kPalette = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e,
                                                       0x9467bd, 0x8c564b, 0xe377c2, 0x17becf};
  return kPalette[i % kPalette.size()];
}

std::vector<uint8_t> render_curves_png(const std::string& title, const std::vector<Series>& series,
                                       const std::string& x_label) {
  Range xr, yr;
  for (const Series& s : series) {
    check(s.x.size() == s.y.size(), "plot: series '", s.name, "' has ", s.x.size(), " x and ",
          s.y.size(), " y values");
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xr.add(s.x[i]);
      yr.add(s.y[i]);
    }
  }
  const bool no_data = xr.empty();
  xr = finish_range(xr, 0.02);
  yr = finish_range(yr, 0.05);
  const std::vector<double> xticks = ticks_for(xr, 8), yticks = ticks_for(yr, 6);
  const std::vector<std::string> xlabels = tick_labels(xticks), ylabels = tick_labels(yticks);

  Canvas canvas(kPlotWidth, kPlotHeight);
  const int char_h = Canvas::text_height(kLabelScale);
  int ylabel_w = 0;
  for (const auto& l : ylabels) ylabel_w = std::max(ylabel_w, Canvas::text_width(l, kLabelScale));
  // The plot area leaves room for the title above, y labels on the left, x labels and the axis
  // label below.
  const Rect area{ylabel_w + 20, 16 + Canvas::text_height(kTitleScale) + 14, kPlotWidth - 24,
                  kPlotHeight - 1 - (8 + char_h + 10 + (x_label.empty() ? 0 : char_h + 10))};
  auto px = [&](double x) {
    return area.x0 +
           static_cast<int>(std::lround((x - xr.lo) / (xr.hi - xr.lo) * (area.x1 - area.x0)));
  };
  auto py = [&](double y) {
    return area.y1 -
           static_cast<int>(std::lround((y - yr.lo) / (yr.hi - yr.lo) * (area.y1 - area.y0)));
  };

  // Grid, ticks and tick labels.
  for (size_t i = 0; i < yticks.size(); ++i) {
    const int y = py(yticks[i]);
    canvas.fill({area.x0 + 1, y, area.x1 - 1, y}, kGrid);
    canvas.fill({area.x0 - 5, y, area.x0 - 1, y}, kFrame);
    canvas.text(area.x0 - 9 - Canvas::text_width(ylabels[i], kLabelScale), y - char_h / 2,
                ylabels[i], kLabelScale, kText);
  }
  // Skip x labels that would overlap their neighbours.
  int widest = 0;
  for (const auto& l : xlabels) widest = std::max(widest, Canvas::text_width(l, kLabelScale));
  const int spacing = xticks.size() > 1 ? std::max(1, px(xticks[1]) - px(xticks[0])) : 1 << 20;
  const size_t stride = static_cast<size_t>((widest + 12 + spacing - 1) / spacing);
  for (size_t i = 0; i < xticks.size(); ++i) {
    const int x = px(xticks[i]);
    canvas.fill({x, area.y0 + 1, x, area.y1 - 1}, kGrid);
    canvas.fill({x, area.y1 + 1, x, area.y1 + 5}, kFrame);
    if (i % stride != 0) continue;
    const int w = Canvas::text_width(xlabels[i], kLabelScale);
    canvas.text(std::clamp(x - w / 2, 0, kPlotWidth - w), area.y1 + 9, xlabels[i], kLabelScale,
                kText);
  }
  canvas.outline(area, kFrame);
  canvas.text((kPlotWidth - Canvas::text_width(title, kTitleScale)) / 2, 12, title, kTitleScale,
              kBlack);
  if (!x_label.empty()) {
    canvas.text((area.x0 + area.x1 - Canvas::text_width(x_label, kLabelScale)) / 2,
                area.y1 + 9 + char_h + 10, x_label, kLabelScale, kText);
  }
  if (no_data) {
    const std::string message = "no data";
    canvas.text((area.x0 + area.x1 - Canvas::text_width(message, kTitleScale)) / 2,
                (area.y0 + area.y1 - Canvas::text_height(kTitleScale)) / 2, message, kTitleScale,
                0x909090);
  }

  // Curves, clipped to the inside of the frame.
  canvas.set_clip({area.x0 + 1, area.y0 + 1, area.x1 - 1, area.y1 - 1});
  std::vector<std::pair<int, int>> points;  // where curves were drawn, to place the legend
  for (const Series& s : series) {
    const size_t n = s.x.size();
    auto finite = [&](size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); };
    size_t count = 0;
    for (size_t i = 0; i < n; ++i) count += finite(i);
    for (size_t i = 0; i < n; ++i) {
      if (!finite(i)) continue;
      const int x = px(s.x[i]), y = py(s.y[i]);
      points.emplace_back(x, y);
      const bool prev = i > 0 && finite(i - 1), next = i + 1 < n && finite(i + 1);
      if (prev) {
        const int x0 = px(s.x[i - 1]), y0 = py(s.y[i - 1]);
        canvas.line(x0, y0, x, y, s.rgb);
        // Samples along the segment too, so that the legend avoids lines, not just points.
        const int samples = std::max(std::abs(x - x0), std::abs(y - y0)) / 4;
        for (int k = 1; k < samples; ++k)
          points.emplace_back(x0 + (x - x0) * k / samples, y0 + (y - y0) * k / samples);
      }
      if (!prev && !next) {
        canvas.dot(x, y, 3, s.rgb);
      } else if (count <= kDotThreshold) {
        canvas.dot(x, y, 2, s.rgb);
      }
    }
  }
  canvas.clear_clip();

  // Legend: a framed box in whichever corner of the plot area covers the fewest points.
  std::vector<const Series*> named;
  for (const Series& s : series)
    if (!s.name.empty()) named.push_back(&s);
  if (!named.empty()) {
    int name_w = 0;
    for (const Series* s : named)
      name_w = std::max(name_w, Canvas::text_width(s->name, kLegendScale));
    const int row_h = Canvas::text_height(kLegendScale) + 8, sample_w = 24;
    const int box_w = 10 + sample_w + 8 + name_w + 10;
    const int box_h = 8 + static_cast<int>(named.size()) * row_h;
    const int m = 10;
    const std::array<Rect, 4> corners = {
        Rect{area.x1 - m - box_w, area.y0 + m, area.x1 - m, area.y0 + m + box_h},
        Rect{area.x1 - m - box_w, area.y1 - m - box_h, area.x1 - m, area.y1 - m},
        Rect{area.x0 + m, area.y0 + m, area.x0 + m + box_w, area.y0 + m + box_h},
        Rect{area.x0 + m, area.y1 - m - box_h, area.x0 + m + box_w, area.y1 - m}};
    Rect box = corners[0];
    size_t best = std::numeric_limits<size_t>::max();
    for (const Rect& r : corners) {
      // With a margin: a dot or a thick line just outside the box still touches it.
      const Rect near{r.x0 - 4, r.y0 - 4, r.x1 + 4, r.y1 + 4};
      const size_t covered = std::count_if(points.begin(), points.end(), [&](const auto& p) {
        return near.contains(p.first, p.second);
      });
      if (covered < best) best = covered, box = r;
    }
    canvas.fill(box, 0xffffff);
    canvas.outline(box, 0xa0a0a0);
    for (size_t i = 0; i < named.size(); ++i) {
      const int top = box.y0 + 8 + static_cast<int>(i) * row_h;
      const int mid = top + Canvas::text_height(kLegendScale) / 2;
      canvas.fill({box.x0 + 10, mid - 1, box.x0 + 10 + sample_w, mid + 1}, named[i]->rgb);
      canvas.text(box.x0 + 10 + sample_w + 8, top, named[i]->name, kLegendScale, kText);
    }
  }

  std::vector<uint8_t> png;
  const int ok = stbi_write_png_to_func(
      [](void* context, void* data, int size) {
        auto* out = static_cast<std::vector<uint8_t>*>(context);
        const auto* bytes = static_cast<const uint8_t*>(data);
        out->insert(out->end(), bytes, bytes + size);
      },
      &png, canvas.width(), canvas.height(), 3, canvas.pixels().data(), canvas.width() * 3);
  check(ok != 0 && !png.empty(), "plot: PNG encoding failed");
  return png;
}

void plot_curves_png(const std::string& path, const std::string& title,
                     const std::vector<Series>& series, const std::string& x_label) {
  const std::vector<uint8_t> png = render_curves_png(title, series, x_label);
  write_file_atomically(path, std::span<const uint8_t>(png));
}

namespace {

// One series per phase (train, valid, test, then any other, in first-seen order) that has a
// finite `column` value.
std::vector<Series> phase_series(const MetricsTable& table, const std::string& column) {
  std::vector<std::string> phases = {"train", "valid", "test"};
  for (const auto& row : table.rows)
    if (std::find(phases.begin(), phases.end(), row.phase) == phases.end())
      phases.push_back(row.phase);
  std::vector<Series> out;
  for (size_t p = 0; p < phases.size(); ++p) {
    const std::string& phase = phases[p];
    Series s;
    s.name = phase + " " + column;
    for (const auto& row : table.rows) {
      if (row.phase != phase) continue;
      const auto it = row.values.find(column);
      if (it == row.values.end() || !std::isfinite(it->second)) continue;
      s.x.push_back(static_cast<double>(row.step));
      s.y.push_back(it->second);
    }
    if (s.x.empty()) continue;
    s.rgb = plot_color(p);  // by phase, so that valid has one colour in every plot
    out.push_back(std::move(s));
  }
  return out;
}

bool is_metric_column(const std::string& name) {
  if (name == "loss" || name == "lr") return false;
  for (const char* word : {"/s", "time", "norm", "elapsed"})
    if (name.find(word) != std::string::npos) return false;
  return true;
}

}  // namespace

std::vector<std::string> plot_training_curves(const std::string& metrics_csv_path,
                                              const std::string& png_path,
                                              const std::string& primary_metric) {
  const MetricsTable table = read_metrics_csv(metrics_csv_path);
  // The run's directory name tells plots of different runs apart.
  const std::string run = std::filesystem::path(metrics_csv_path).parent_path().filename().string();
  const std::string prefix = run.empty() ? "" : run + ": ";

  std::string metric = primary_metric;
  if (metric.empty()) {
    for (const auto& column : table.columns) {
      if (!is_metric_column(column)) continue;
      const bool in_valid = std::any_of(table.rows.begin(), table.rows.end(), [&](const auto& r) {
        const auto it = r.values.find(column);
        return r.phase == "valid" && it != r.values.end() && std::isfinite(it->second);
      });
      if (in_valid) {
        metric = column;
        break;
      }
    }
  } else {
    check(std::find(table.columns.begin(), table.columns.end(), metric) != table.columns.end(),
          metrics_csv_path, ": no column '", metric, "' to plot");
  }
  // The best checkpoint is the valid row with the highest primary metric (the lowest loss when
  // there is none), as the trainer chooses it: marked with a dot in both plots.
  const MetricsRow* best = nullptr;
  for (const auto& row : table.rows) {
    if (row.phase != "valid") continue;
    const auto it = row.values.find(metric.empty() ? "loss" : metric);
    if (it == row.values.end() || !std::isfinite(it->second)) continue;
    if (best == nullptr) {
      best = &row;
      continue;
    }
    const double b = best->values.at(metric.empty() ? "loss" : metric);
    if (metric.empty() ? it->second < b : it->second > b) best = &row;
  }
  auto with_best = [&](std::vector<Series> series, const std::string& column, bool log10_y) {
    if (best == nullptr) return series;
    const auto it = best->values.find(column);
    if (it != best->values.end() && std::isfinite(it->second)) {
      Series mark;
      mark.name = "best checkpoint (step " + std::to_string(best->step) + ")";
      mark.x = {static_cast<double>(best->step)};
      mark.y = {log10_y ? std::log10(it->second) : it->second};
      mark.rgb = 0x000000;
      series.push_back(std::move(mark));
    }
    return series;
  };

  // A loss that falls over more than two decades is drawn on a log scale, where its late
  // progress stays visible.
  std::vector<Series> loss = phase_series(table, "loss");
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& se : loss)
    for (double y : se.y) lo = std::min(lo, y), hi = std::max(hi, y);
  const bool log_loss = lo > 0 && hi / lo > 100;
  if (log_loss)
    for (auto& se : loss)
      for (double& y : se.y) y = std::log10(y);
  std::vector<std::string> written;
  plot_curves_png(png_path, prefix + (log_loss ? "log10 loss" : "loss"),
                  with_best(std::move(loss), "loss", log_loss), "step");
  written.push_back(png_path);

  if (!metric.empty()) {
    std::string stem = png_path;
    if (stem.size() >= 4 && stem.compare(stem.size() - 4, 4, ".png") == 0)
      stem.resize(stem.size() - 4);
    std::string safe = metric;
    for (char& c : safe)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    const std::string path = stem + "_" + safe + ".png";
    plot_curves_png(path, prefix + metric, with_best(phase_series(table, metric), metric, false),
                    "step");
    written.push_back(path);
  }
  return written;
}

void write_run_curves(const std::string& out_dir, const std::string& primary_metric) {
  plot_training_curves(out_dir + "/metrics.csv", out_dir + "/curves.png", primary_metric);
}

}  // namespace mixlab::lab
