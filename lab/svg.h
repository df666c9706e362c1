// SVG, the lab's one picture format: the primitives every figure is built from (text, numbers,
// "nice" axis ticks) and the pictures of `mixlab inspect` (heatmaps, patch overlays). The charts
// (training curves, the study's figures) are in lab/plot.h.
//
// Why SVG: its text is drawn by the browser (or rsvg-convert) in a real font at any size, so
// mixed-case tokens ("Walk", "jump", "<bos>") and 40-60 labels per axis stay legible and sharp
// when zoomed, and each heatmap cell carries its exact value as a hover tooltip. A bitmap is used
// only where the picture is one: an input image, embedded as a PNG data URI.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab::lab {

// "1580", "0.25", "3e-05": a value in at most `precision` significant digits.
std::string svg_number(double v, int precision = 3);
// A coordinate with one decimal.
std::string svg_px(double v);
// The opening <svg> element at this size, with the font family and a white background.
std::string svg_open(double width, double height);
// A <text> element at (x, y) (the baseline's start), escaped; `extra` adds attributes.
std::string svg_text(double x, double y, const std::string& s, double size,
                     const std::string& extra = "");
// Width of a label in a proportional font, roughly (0.6 em per UTF-8 code point).
double svg_text_width(const std::string& s, double size);

// "Nice" tick values inside [lo, hi]: integer multiples of a step of 1, 2 or 5 times a power of
// ten, about `wanted` of them and never fewer than two when hi > lo (so 1347..1957 gets 1400,
// 1500, ..., 1900). Empty for a non-finite range; {lo} for an empty one.
std::vector<double> nice_ticks(double lo, double hi, int wanted = 5);
// A tick's label with the digits its step needs: 1400, 0.25, 0.05, 2.5e-05.
std::string tick_label(double value, double step);

// Viridis (matplotlib's perceptually uniform map) at t in [0, 1] as "#rrggbb".
std::string viridis(double t);
// Text made safe for XML and HTML (&, <, >, ").
std::string xml_escape(const std::string& text);

struct Heatmap {
  std::string title;     // e.g. "layer 0 · head 1 · attention"
  std::string subtitle;  // e.g. "encoder.layers.0.mixer (synth-mix:R+V): each row sums to 1"
  int64_t rows = 0, cols = 0;
  std::vector<double> values;  // row-major, rows x cols
  std::vector<std::string> row_labels, col_labels;
  std::string row_axis, col_axis;  // e.g. "query", "key"
};

// A heatmap with labelled axes (font size follows the cell size, so 20-60 tokens stay legible)
// and a colour bar with round values; the colour scale spans the matrix's own min..max.
std::string heatmap_svg(const Heatmap& map);

// For image classifiers: the image drawn once per query patch, each key patch tinted by the
// weight that query gives it (viridis, scaled to the row's maximum), the query outlined in red.
// `gray` holds the image's pixels (0-255, side x side); weights[q][k] for patch tokens only.
std::string patch_attention_svg(const std::string& title, const std::vector<uint8_t>& gray,
                                int side, int patch,
                                const std::vector<std::vector<double>>& weights);

}  // namespace mixlab::lab
