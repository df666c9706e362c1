// The pictures of `mixlab inspect` and `mixlab study`, written as SVG.
//
// Why SVG and not the PNG writer of io/plot.cpp: that writer's 5x7 bitmap font has capitals
// only, so mixed-case tokens ("Walk", "jump", "<bos>") and 40-60 labels per axis cannot be drawn
// legibly with it. SVG text is drawn by the browser (or rsvg-convert) in a real font at any size,
// stays sharp when zoomed, and each heatmap cell carries its exact value as a hover tooltip.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab::lab {

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

// Line charts and scatter plots for the study report.
struct ChartSeries {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> y_err;  // optional error bars (same length as y) for scatter points
};
std::string line_chart_svg(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<ChartSeries>& series,
                           bool log_y = false);
// One labelled point (or a few, one per seed) per series.
std::string scatter_svg(const std::string& title, const std::string& x_label,
                        const std::string& y_label, const std::vector<ChartSeries>& series,
                        bool log_x = false);

}  // namespace mixlab::lab
