// The lab's plot writer (lab/plot.h): nice ticks, tick labels on every axis of every chart (read
// back from the SVG), scatter labels that do not overlap, and the training curves as SVG text.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/run_log.h"
#include "lab/plot.h"
#include "train/loop/trainer.h"
#include "lab/svg.h"
#include "tests/file_helpers.h"
#include "tests/svg_figure.h"
#include "tests/temp_dir.h"

using namespace mixlab;
using namespace mixlab::lab;
using mixlab::testing::svg_texts;
using mixlab::testing::svg_tick_values;

namespace {

// A missing or broken value in a series.
constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// The height="…" of the figure's <svg> element.
double svg_height(const std::string& svg) {
  const size_t at = svg.find("height=\"");
  REQUIRE(at != std::string::npos);
  return std::stod(svg.substr(at + 8));
}

// Every legend entry lies inside the figure (its text's baseline and descent above the bottom).
void check_legend_inside(const std::string& svg, size_t entries) {
  const auto legend = svg_texts(svg, "legend");
  REQUIRE(legend.size() == entries);
  const double height = svg_height(svg);
  for (const auto& entry : legend) {
    INFO(entry.text, " at y = ", entry.y, " in a figure ", height, " high");
    CHECK(entry.y + 4 <= height);
  }
}

// Both axes have at least two tick labels, in increasing order, inside the data's range padded
// by the chart (a tenth of the span either side is generous).
void check_axis(const std::string& svg, const std::string& axis, double lo, double hi) {
  const std::vector<double> ticks = svg_tick_values(svg, axis);
  INFO("axis ", axis, " of ", lo, "..", hi);
  REQUIRE(ticks.size() >= 2);
  for (size_t i = 1; i < ticks.size(); ++i) CHECK(ticks[i] > ticks[i - 1]);
  const double pad = 0.1 * (hi - lo);
  CHECK(ticks.front() >= lo - pad);
  CHECK(ticks.back() <= hi + pad);
}

}  // namespace

TEST_CASE("lab plot: nice ticks are round steps inside the range, never fewer than two") {
  CHECK(nice_ticks(1347, 1957) == std::vector<double>{1400, 1500, 1600, 1700, 1800, 1900});
  CHECK(nice_ticks(0, 1) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  CHECK(nice_ticks(0.23, 0.4).size() >= 2);
  CHECK(nice_ticks(-3, 3).front() == -3);
  CHECK(nice_ticks(5, 5) == std::vector<double>{5});
  CHECK(nice_ticks(kMissing, 1).empty());
  for (double span : {1e-6, 0.013, 1.0, 7.0, 610.0, 3e9}) {
    const auto t = nice_ticks(1.0, 1.0 + span);
    CHECK(t.size() >= 2);
    CHECK(t.size() <= 11);
  }
  CHECK(tick_label(1400, 100) == "1400");
  CHECK(tick_label(0.6000000000000001, 0.2) == "0.6");
  CHECK(tick_label(0.05, 0.05) == "0.05");
  CHECK(tick_label(2.5e-5, 5e-6) == "2.5e-05");
}

TEST_CASE("lab plot: a log-x scatter over 1347-1957 examples/s has labelled ticks on both axes") {
  // The range holds no 1, 2 or 5 times a power of ten: nice values of the range are used.
  std::vector<ChartSeries> points;
  const double xs[] = {1347, 1500, 1620, 1957}, ys[] = {0.23, 0.31, 0.40, 0.35};
  for (int i = 0; i < 4; ++i)
    points.push_back({"mixer-" + std::to_string(i), {xs[i]}, {ys[i]}, {0.01}, ""});
  const std::string svg =
      scatter_svg("accuracy against throughput", "examples/s", "accuracy", points, /*log_x=*/true);
  check_axis(svg, "x", 1347, 1957);
  check_axis(svg, "y", 0.22, 0.41);
  CHECK(svg.find("examples/s (log scale)") != std::string::npos);  // the axis label
  CHECK(svg.find("<image") == std::string::npos);                  // text, not a bitmap
}

TEST_CASE("lab plot: scatter points are named in the legend and their labels never overlap") {
  // 24 mixers crowded into one spot and one far away: every one in the legend (colour and
  // shape), and the labels written beside points do not cover one another.
  std::vector<ChartSeries> points;
  for (int i = 0; i < 24; ++i)
    points.push_back(
        {"mixer-number-" + std::to_string(i), {1000.0 + 0.5 * i}, {0.5 + 1e-4 * i}, {}, ""});
  points.push_back({"mixer-number-24", {2000.0}, {0.9}, {}, ""});
  const std::string svg = scatter_svg("crowded", "ex/s", "acc", points);
  const auto legend = svg_texts(svg, "legend");
  REQUIRE(legend.size() == 25);
  for (int i = 0; i < 25; ++i) CHECK(legend[i].text == points[i].name);
  check_legend_inside(svg, 25);  // more entries than the plot is high: the figure grows
  const auto labels = svg_texts(svg, "point-label");
  CHECK(labels.size() < 25);  // too crowded for all: the legend names the rest
  for (size_t a = 0; a < labels.size(); ++a)
    for (size_t b = a + 1; b < labels.size(); ++b) {
      const double wa = svg_text_width(labels[a].text, 10), wb = svg_text_width(labels[b].text, 10);
      const bool apart = labels[a].x + wa <= labels[b].x || labels[b].x + wb <= labels[a].x ||
                         labels[a].y + 2 <= labels[b].y - 10 || labels[b].y + 2 <= labels[a].y - 10;
      CHECK(apart);
    }
  check_axis(svg, "x", 1000, 2000);
  check_axis(svg, "y", 0.5, 0.9);
}

TEST_CASE("lab plot: line charts skip non-finite points, no data says so, bad series refused") {
  const std::string svg = line_chart_svg(
      "loss", "step", "loss", {{"valid", {0, 500, 1000, 1500}, {2.0, kMissing, 1.0, 0.5}, {}, ""}});
  CHECK(svg.find("nan") == std::string::npos);
  check_axis(svg, "x", 0, 1500);
  check_axis(svg, "y", 0.5, 2.0);
  const std::string empty =
      line_chart_svg("nothing", "step", "loss", {{"x", {1}, {kMissing}, {}, ""}});
  CHECK(empty.find("no data") != std::string::npos);
  CHECK(svg_tick_values(empty, "x").size() >= 2);
  CHECK_THROWS_AS(line_chart_svg("bad", "x", "y", {{"b", {1, 2}, {1}, {}, ""}}), Error);

  // A study's learning curves: one line per mixer, more than the plot is high.
  std::vector<ChartSeries> many;
  for (int i = 0; i < 30; ++i)
    many.push_back({"mixer-" + std::to_string(i), {0, 100}, {2.0 - 0.01 * i, 1.0}, {}, ""});
  check_legend_inside(line_chart_svg("curves", "step", "loss", many), 30);
}

TEST_CASE("lab plot: a run's curves.svg has loss and metric panels with ticks and the best step") {
  mixlab::testing::TempDir dir;
  const std::filesystem::path run = dir.root / "run-1";
  std::filesystem::create_directories(run);
  {
    MetricsLog log((run / "metrics.csv").string(), {"loss", "lr", "examples/s", "accuracy"});
    for (int step = 10; step <= 300; step += 10)
      log.log("train", step, step / 100,
              {{"loss", 100.0 / (step * step)}, {"lr", 1e-3}, {"examples/s", 900}});
    for (int step = 100; step <= 300; step += 100)
      log.log("valid", step, step / 100 - 1,
              {{"loss", 3.0 / step}, {"accuracy", step == 200 ? 0.9 : 0.5}});
    log.log("test", 300, 2, {{"loss", 0.01}, {"accuracy", 0.88}});
  }
  const std::string path = write_run_curves(run.string(), "");
  CHECK(path == (run / "curves.svg").string());
  const std::string svg = mixlab::testing::read_file(path);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("run-1: loss") != std::string::npos);
  CHECK(svg.find("run-1: accuracy") != std::string::npos);  // the first metric column
  CHECK(svg.find("best checkpoint (step 200)") != std::string::npos);
  CHECK(svg.find("<image") == std::string::npos);
  // Two panels, each with ticks on both axes; the loss falls over two decades: a log axis.
  CHECK(svg_tick_values(svg, "x").size() >= 4);
  CHECK(svg_tick_values(svg, "y").size() >= 4);
  CHECK(svg.find("loss (log scale)") != std::string::npos);
  // An explicit metric is drawn; one that is not a column is an error.
  CHECK(training_curves_svg(read_metrics_csv((run / "metrics.csv").string()), "r", "lr")
            .find("r: lr") != std::string::npos);
  CHECK_THROWS_AS(write_run_curves(run.string(), "bleu"), Error);
}

TEST_CASE("lab plot: a train row's loss is its log window's mean, other rows' their loss") {
  MetricsRow a{"valid", 1, 0, {{"loss", 2.5}}};
  MetricsRow b{"train", 2, 0, {{kTrainLossColumn, 1.5}, {"lr", 0.1}}};
  MetricsRow c{"train", 3, 0, {{"lr", 0.1}}};
  CHECK(row_loss(a) == 2.5);
  CHECK(row_loss(b) == 1.5);
  CHECK(std::isnan(row_loss(c)));
}
