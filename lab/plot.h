// The lab's one plot writer: line charts and scatter plots as SVG, with real text a browser
// draws (lab/svg.h). The training curves of every run (curves.svg) and the study's figures come
// from it.
//
// Every chart has a title, axis labels, and on both axes ticks with labels at "nice" values
// (nice_ticks: a range like 1347..1957 gets 1400, 1500, ..., 1900; a log axis gets 1, 2 and 5
// times the powers of ten when at least three fall inside, else nice values of its own range).
// Tick labels carry class="tick-x" / class="tick-y", so tests (and scripts) can find them.
//
// Data handling: non-finite points are skipped and break a line there; a series of few points
// is drawn with a dot at each; ranges of zero width are widened around the value; a chart with
// no finite point says "no data". Scatter points are told apart by colour and marker shape (ten
// colours times four shapes) and named in a legend beside the plot; each point also carries its
// name next to it where that label overlaps no other label or point.
#pragma once
#include <string>
#include <vector>

#include "io/run_log.h"

namespace mixlab::lab {

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> y_err;  // optional half-widths of an interval around y (error bars)
  std::string colour;         // "#rrggbb"; empty: the palette's colour for the series' place
};

std::string line_chart_svg(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<ChartSeries>& series,
                           bool log_y = false);
std::string scatter_svg(const std::string& title, const std::string& x_label,
                        const std::string& y_label, const std::vector<ChartSeries>& series,
                        bool log_x = false);

// A row's training or evaluation loss: the column "loss", else kTrainLossColumn (a train row's
// mean over its log window, train/loop/trainer.h). NaN when neither.
double row_loss(const MetricsRow& row);

// The curves of a metrics log (io/run_log.h) against step, one SVG with two panels:
//  - the loss, one series per phase that has it (train, valid, test), on a log axis when it
//    falls over more than two decades;
//  - the primary metric, the same way, when there is one: `primary_metric` if given (Error if it
//    is not a column), else the first column in file order, other than the loss, that has a
//    finite value in a valid row and is not a rate, time or norm column.
// Both mark the best checkpoint (the valid row with the highest primary metric, or the lowest
// loss without one). `title` heads the picture (e.g. the run folder's name).
std::string training_curves_svg(const MetricsTable& table, const std::string& title,
                                const std::string& primary_metric = "");

// OUT_DIR/curves.svg from OUT_DIR/metrics.csv, written atomically; returns its path. The
// commands' TrainerOptions::draw_curves.
std::string write_run_curves(const std::string& out_dir, const std::string& primary_metric);

}  // namespace mixlab::lab
