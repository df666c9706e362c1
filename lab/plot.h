// A small self-contained line-plot renderer for training curves: kPlotWidth x kPlotHeight RGB
// PNGs with a frame, grid, ticks with numeric labels, a title, an x-axis label and a legend, in
// a built-in 5x7 bitmap font (upper case only: lower-case letters are drawn as capitals).
//
// Data handling: non-finite points (NaN, inf) are skipped and break the line there; points with
// no finite neighbour (a single point, or one between NaNs) are drawn as dots, and every point
// gets a dot when a series has few of them. Ranges of zero width (one point, a flat curve) are
// widened around the value; with no finite point at all, the axes are drawn with "NO DATA".
// The legend goes in the corner of the plot area that covers the fewest points.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab::lab {

constexpr int kPlotWidth = 800;
constexpr int kPlotHeight = 500;

struct Series {
  std::string name;       // legend entry; empty leaves the series out of the legend
  std::vector<double> x;  // same length as y (Error otherwise); drawn in the given order
  std::vector<double> y;
  uint32_t rgb = 0x1f77b4;  // 0xRRGGBB
};

// A palette of distinct line colours for series i (cycles after 8).
uint32_t plot_color(size_t i);

// The PNG file's bytes.
std::vector<uint8_t> render_curves_png(const std::string& title, const std::vector<Series>& series,
                                       const std::string& x_label);

// Renders and writes the PNG atomically (write_file_atomically); Error on failure.
void plot_curves_png(const std::string& path, const std::string& title,
                     const std::vector<Series>& series, const std::string& x_label);

// Plots a MetricsLog CSV (io/run_log.h) against step, one PNG per quantity:
//  - `png_path`: the "loss" column, one series per phase that has it (train, valid, test; each
//    phase keeps its colour across plots);
//  - `<png_path without .png>_<metric>.png`: the same for the primary metric, when there is one.
// The primary metric is `primary_metric` if given (Error if it is not a column), else the first
// column in file order, other than loss, that has a finite value in a valid row and is not a
// learning rate, rate, time or norm column (lr, names containing "/s", "time", "norm",
// "elapsed"). Two separate PNGs rather than two panels keep each at the full plot size.
// Both mark the best checkpoint (the valid row with the highest primary metric, or the lowest
// loss without one) with a black dot; a loss spanning more than two decades is drawn as log10.
// Returns the paths written.
std::vector<std::string> plot_training_curves(const std::string& metrics_csv_path,
                                              const std::string& png_path,
                                              const std::string& primary_metric = "");

// The curves of the run in `out_dir` (its metrics.csv), as plot_training_curves draws them;
// TrainerOptions::draw_curves for the commands.
void write_run_curves(const std::string& out_dir, const std::string& primary_metric);

}  // namespace mixlab::lab
