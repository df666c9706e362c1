// The study's report: one table per task, learning curves, quality against throughput, length
// generalisation, a gallery of mixing matrices, and the papers' claims checked against the
// numbers. Written twice from one list of blocks (lab/report_document.h): report.md and
// report.html.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "lab/plot.h"
#include "lab/report_document.h"
#include "lab/study.h"
#include "lab/study_stats.h"
#include "lab/svg.h"
#include "core/strings.h"
#include "nn/mixer_registry.h"
#include "io/atomic_file.h"
#include "io/run_log.h"
#include "train/loop/trainer.h"

namespace mixlab::lab {

namespace fs = std::filesystem;

namespace {

using Block = ReportBlock;

// ---- numbers over seeds ----

std::string fmt(double v, int digits = 3) {
  if (!std::isfinite(v)) return "n/a";
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

// "0.912 ± 0.014 (3 seeds)": the mean and its 95% t-interval over seeds.
std::string with_interval(const std::vector<double>& v, int digits = 3, bool count = true) {
  if (v.empty()) return "n/a";
  const SeedInterval s = seed_interval(v);
  std::string text = fmt(s.mean, digits);
  if (s.n > 1) text += " ± " + fmt(s.half_width, digits);
  if (count) text += s.n == 1 ? " (1 seed)" : " (" + std::to_string(s.n) + " seeds)";
  return text;
}

bool is_proportion(const std::string& metric) {
  return metric == "accuracy" || metric == "exact_match" || metric == "token_accuracy";
}

struct Row {  // one (task, mixer) over its seeds
  std::string mixer;
  std::vector<double> metric, throughput, wall, late;
  int64_t parameters = 0, test_size = 0;
  std::vector<std::vector<double>> length;  // per bin, per seed
  int unfinished = 0;
  // Every seed's validation metric settled (late gain known and at most the threshold).
  bool converged() const {
    if (late.empty()) return false;
    for (double g : late)
      if (!std::isfinite(g) || g > kConvergenceThreshold) return false;
    return true;
  }
  std::string convergence() const {
    if (late.empty()) return "n/a";
    double worst = -INFINITY;
    for (double g : late) worst = std::isfinite(g) ? std::max(worst, g) : INFINITY;
    if (!std::isfinite(worst)) return "not converged (too few evaluations to tell)";
    // Four decimals, so a gain just over the threshold does not print as the threshold itself.
    return (converged() ? "yes (" : "not converged (") + std::string(worst >= 0 ? "+" : "") +
           fmt(worst, 4) + ")";
  }
};

std::string length_support(const std::string& mixer) {
  switch (MixerRegistry::instance().find(mixer).capabilities.length) {
    case LengthSupport::Any:
      return "any length";
    case LengthSupport::UpToMaxLen:
      return "up to ℓ";
    case LengthSupport::PaddedToMaxLen:
      return "padded to ℓ";
  }
  return "?";
}

std::map<std::string, Row> rows_of(const StudyTask& t, const std::vector<std::string>& mixers,
                                   const std::vector<CellResult>& cells) {
  std::map<std::string, Row> out;
  for (const auto& m : mixers) {
    Row r;
    r.mixer = m;
    r.length.resize(t.length_bins.size());
    for (const auto& c : cells) {
      if (c.task != t.name || c.mixer != m) continue;
      if (!c.done) {
        ++r.unfinished;
        continue;
      }
      if (c.has_metric) r.metric.push_back(c.metric);
      if (c.has_throughput) r.throughput.push_back(c.throughput);
      r.wall.push_back(c.wall_seconds);
      r.late.push_back(c.late_improvement);
      r.parameters = c.parameters;
      r.test_size = std::max(r.test_size, c.test_size);
      for (size_t b = 0; b < c.length_accuracy.size() && b < r.length.size(); ++b)
        r.length[b].push_back(c.length_accuracy[b]);
    }
    out[m] = r;
  }
  return out;
}

// The 95% Wilson interval of a mean accuracy on a test set of n examples: "[0.871, 0.903]".
std::string binomial_text(const Row& r) {
  if (r.metric.empty() || r.test_size <= 0) return "n/a";
  const Bounds b = wilson_interval(seed_interval(r.metric).mean, r.test_size);
  return "[" + fmt(b.lo) + ", " + fmt(b.hi) + "]";
}

// ---- the papers' claims ----

// The verdicts of one claim's comparisons, summed up.
struct Verdicts {
  std::vector<std::string> each, evidence;
  void add(const std::string& verdict, const std::string& numbers) {
    each.push_back(verdict);
    evidence.push_back(numbers + ": " + verdict);
  }
  std::string verdict() const {
    int supported = 0, contradicted = 0, inconclusive = 0;
    for (const auto& v : each) {
      supported += v == "supported";
      contradicted += v == "contradicted";
      inconclusive += v.rfind("inconclusive", 0) == 0;
    }
    const int n = static_cast<int>(each.size());
    if (n == 0) return "**not measured**";
    if (supported == n) return "**supported**";
    if (contradicted == n) return "**contradicted**";
    if (inconclusive == n)
      return n == 1 ? "**" + each[0] + "**" : "**inconclusive** (every comparison)";
    return "**mixed** (supported in " + std::to_string(supported) + ", contradicted in " +
           std::to_string(contradicted) + ", inconclusive in " + std::to_string(inconclusive) +
           " of " + std::to_string(n) + " comparisons)";
  }
};

const Row* find_row(const std::map<std::string, Row>& rows, const std::string& m) {
  auto it = rows.find(m);
  return it == rows.end() || it->second.metric.empty() ? nullptr : &it->second;
}

std::string numbers(const StudyTask& t, const std::string& a, const Row& ra, const std::string& b,
                    const Row& rb) {
  return t.name + ": " + a + " " + with_interval(ra.metric) + " vs " + b + " " +
         with_interval(rb.metric) + " (test " + t.metric + ")";
}

// "a is better than b" on task t, by Welch's test over seeds; not converged cells decide nothing.
std::string better(const StudyTask& t, const Row& a, const Row& b) {
  if (!a.converged() || !b.converged()) return "inconclusive: not converged";
  return verdict_better(a.metric, b.metric, t.higher_is_better);
}

// "a is at least as good as b" on task t, within `margin` of the metric: supported when the whole
// 95% Welch interval of a − b lies above −margin, contradicted when it lies below.
std::string at_least_as_good(const StudyTask& t, const Row& a, const Row& b, double margin) {
  if (!a.converged() || !b.converged()) return "inconclusive: not converged";
  const WelchResult w = welch_test(a.metric, b.metric);
  if (!w.ok) return "inconclusive (one seed: no test)";
  const double gain = t.higher_is_better ? w.difference : -w.difference;
  if (gain - w.half_width >= -margin) return "supported";
  if (gain + w.half_width < -margin) return "contradicted";
  return "inconclusive (difference " + fmt(gain) + " ± " + fmt(w.half_width) + ")";
}

bool is_scan(const StudyTask& t) { return t.name.rfind("scan", 0) == 0; }

std::vector<Block> claims(const StudyOptions& o, const std::vector<StudyTask>& tasks,
                          const std::map<std::string, std::map<std::string, Row>>& all) {
  std::vector<Block> out;
  out.push_back({Block::Heading, "The papers' claims, checked", "", {}});
  const bool any_verdicts =
      std::any_of(tasks.begin(), tasks.end(), [](const StudyTask& t) { return t.verdicts; });
  if (!any_verdicts) {
    out.push_back({Block::Paragraph,
                   "**smoke test: no verdicts.** The " + o.budget +
                       " budget checks that every mixer trains, is measured and is drawn; its "
                       "cells are far from converged, so they say nothing about the papers' "
                       "claims. Run `--budget small` (3 seeds) for verdicts.",
                   "",
                   {}});
    return out;
  }
  std::vector<std::vector<std::string>> items;
  auto add = [&](const std::string& claim, const Verdicts& v, const std::string& note,
                 const std::string& needs) {
    std::string text = claim + ": " + v.verdict() + ".";
    if (v.evidence.empty()) text += " It needs " + needs + " in the study.";
    for (const auto& e : v.evidence) text += " " + e + ".";
    if (!note.empty()) text += " " + note;
    items.push_back({text});
  };
  auto pairwise = [&](const std::string& a, const std::string& b) {
    Verdicts v;
    for (const auto& t : tasks) {
      const auto& rows = all.at(t.name);
      const Row *ra = find_row(rows, a), *rb = find_row(rows, b);
      if (t.verdicts && ra && rb) v.add(better(t, *ra, *rb), numbers(t, a, *ra, b, *rb));
    }
    return v;
  };
  add("Synthesizer: the mixture R+V (synth-mix:R+V) is better than V alone (dot-product "
      "attention)",
      pairwise("synth-mix:R+V", "attention"), "", "synth-mix:R+V and attention");
  add("Synthesizer: Fix (synth-fixed, a frozen random matrix) is below R (synth-random, trained)",
      pairwise("synth-random", "synth-fixed"), "", "synth-random and synth-fixed");
  {
    Verdicts v;
    for (const auto& t : tasks) {
      const auto& rows = all.at(t.name);
      const Row* att = find_row(rows, "attention");
      if (!t.verdicts || t.name.rfind("scan", 0) != 0 || !att) continue;
      for (const char* m : {"synth-random", "synth-fixed", "resmlp", "fnet"})
        if (const Row* r = find_row(rows, m))
          v.add(better(t, *att, *r), numbers(t, "attention", *att, m, *r));
    }
    add("Input-independent mixers (synth-random, synth-fixed, resmlp, fnet) fall behind "
        "attention where the task needs input-dependent alignment (SCAN)",
        v, "(one comparison per mixer and SCAN task)",
        "a SCAN task (scan, scan-length, scan-jump) with attention and one of those mixers");
  }
  {
    Verdicts v;
    const double kLittle = 0.02;
    for (const auto& t : tasks) {
      const auto& rows = all.at(t.name);
      for (auto [factorised, full] :
           {std::pair{"synth-frandom", "synth-random"}, std::pair{"synth-fdense", "synth-dense"}}) {
        const Row *f = find_row(rows, factorised), *r = find_row(rows, full);
        if (!t.verdicts || !f || !r) continue;
        const std::string said = numbers(t, factorised, *f, full, *r) + "; parameters " +
                                 std::to_string(f->parameters) + " vs " +
                                 std::to_string(r->parameters);
        const WelchResult w = welch_test(r->metric, f->metric);
        const double lost = t.higher_is_better ? w.difference : -w.difference;
        std::string verdict;
        // Where the factorisation saves nothing (k >= l/2 at a short length) the claim's
        // premise is absent, which says nothing against the claim.
        if (f->parameters >= r->parameters)
          verdict = "inconclusive: no fewer parameters at this length";
        else if (!f->converged() || !r->converged())
          verdict = "inconclusive: not converged";
        else if (!w.ok)
          verdict = "inconclusive (one seed: no test)";
        else if (lost + w.half_width <= kLittle)
          verdict = "supported";
        else if (lost - w.half_width > kLittle)
          verdict = "contradicted";
        else
          verdict = "inconclusive (quality lost " + fmt(lost) + " ± " + fmt(w.half_width) + ")";
        v.add(verdict, said);
      }
    }
    add("The factorised synthesizers trade little quality for fewer parameters", v,
        "(\"little\": at most 0.02 of the metric lost; supported when the whole 95% Welch "
        "interval of the loss is within 0.02, contradicted when it is all above)",
        "synth-frandom with synth-random, or synth-fdense with synth-dense");
  }
  {
    Verdicts v;
    for (const auto& t : tasks) {
      const auto& rows = all.at(t.name);
      auto att = rows.find("attention");
      if (!t.verdicts || att == rows.end() || att->second.throughput.empty()) continue;
      for (const char* m : {"fnet", "mlp-mixer", "resmlp", "ffonly"}) {
        auto r = rows.find(m);
        if (r == rows.end() || r->second.throughput.empty()) continue;
        v.add(verdict_better(r->second.throughput, att->second.throughput, true, 0),
              t.name + ": " + m + " " + with_interval(r->second.throughput, 0) + " vs attention " +
                  with_interval(att->second.throughput, 0) + " training examples/s");
      }
    }
    add("FNet and the MLP mixers (mlp-mixer, resmlp, ffonly) train faster per example than "
        "attention",
        v,
        "(throughput needs no convergence; cells ran " +
            (o.jobs > 1 ? std::to_string(o.jobs) + " at a time" : std::string("one at a time")) +
            ", on a machine that may have been shared)",
        "attention and at least one of fnet, mlp-mixer, resmlp, ffonly");
  }
  {
    Verdicts v;
    const double kLittle = 0.02;
    for (const auto& t : tasks) {
      const auto& rows = all.at(t.name);
      const Row *m = find_row(rows, "mamba"), *a = find_row(rows, "attention");
      if (!t.verdicts || !is_scan(t) || !m || !a) continue;
      v.add(at_least_as_good(t, *m, *a, kLittle),
            numbers(t, "mamba", *m, "attention", *a) + "; parameters " +
                std::to_string(m->parameters) + " vs " + std::to_string(a->parameters));
    }
    add("Mamba: the selective scan is at least as good as attention on SCAN", v,
        "(\"at least as good\": supported when the whole 95% Welch interval of mamba − attention "
        "lies above −0.02, contradicted when it lies below; the parameter counts are shown, as "
        "the paper compares at equal size)",
        "a SCAN task with mamba and attention");
  }
  {
    Verdicts v;
    for (const auto& t : tasks) {
      const auto& rows = all.at(t.name);
      const Row *m = find_row(rows, "mamba"), *s = find_row(rows, "s4d");
      const bool input_dependent = is_scan(t) || t.name.rfind("listops", 0) == 0;
      if (t.verdicts && input_dependent && m && s)
        v.add(better(t, *m, *s), numbers(t, "mamba", *m, "s4d", *s));
    }
    add("Selective state spaces (mamba) beat time-invariant ones (s4d) where the mixing must "
        "depend on the input (SCAN, ListOps)",
        v, "", "mamba and s4d on a SCAN or ListOps task");
  }
  out.push_back(
      {Block::Paragraph,
       "Each claim is judged per task from the per-seed results: **supported** or "
       "**contradicted** only when Welch's t-test (unequal variances, two-sided) is significant "
       "at 5%, else **inconclusive** with the difference and its 95% interval. A comparison "
       "that rests on a cell marked not converged is **inconclusive: not converged**. Numbers "
       "are means ± 95% t-intervals over seeds.",
       "",
       {}});
  out.push_back({Block::List, "", "", items});
  return out;
}

std::vector<ChartSeries> learning_curves(const StudyTask& t, const std::vector<CellResult>& cells) {
  std::vector<ChartSeries> out;
  for (const auto& c : cells) {
    if (c.task != t.name || c.seed != 0 || !c.done) continue;
    ChartSeries s;
    s.name = c.mixer;
    try {
      MetricsTable table = read_metrics_csv(c.dir + "/metrics.csv");
      for (const auto& row : table.rows)
        if (row.phase == "train" && std::isfinite(row_loss(row))) {
          s.x.push_back(static_cast<double>(row.step));
          s.y.push_back(row_loss(row));
        }
    } catch (const std::exception&) {
      continue;  // no curve for this cell; the table still has its row
    }
    out.push_back(std::move(s));
  }
  return out;
}

// How far seeds of one mixer fall apart in this study: the median and the largest standard
// deviation of the task metric over seeds, over every (task, mixer) with two seeds or more.
std::string seed_spread_text(const std::map<std::string, std::map<std::string, Row>>& all) {
  std::vector<double> sds;
  for (const auto& [task, rows] : all)
    for (const auto& [mixer, r] : rows)
      if (r.metric.size() >= 2) sds.push_back(seed_interval(r.metric).sd);
  if (sds.empty())
    return "With one seed per mixer the seed-to-seed spread is not measured here, and one seed "
           "cannot tell two mixers apart unless they differ by much more than that spread";
  std::sort(sds.begin(), sds.end());
  const double median =
      sds.size() % 2 ? sds[sds.size() / 2] : 0.5 * (sds[sds.size() / 2 - 1] + sds[sds.size() / 2]);
  return "Here the seeds of one mixer differ by a standard deviation of " + fmt(median) +
         " in the task metric (the median over " + std::to_string(sds.size()) +
         " task-mixer pairs; up to " + fmt(sds.back()) +
         "), so one seed cannot tell two mixers apart unless they differ by much more";
}

// What one seed and the budget can and cannot show: the report's first paragraph.
Block caveats(const StudyOptions& o, const std::vector<StudyTask>& tasks,
              const std::map<std::string, std::map<std::string, Row>>& all) {
  const bool smoke =
      std::none_of(tasks.begin(), tasks.end(), [](const StudyTask& t) { return t.verdicts; });
  std::string text =
      "**What these numbers can and cannot show.** Each cell is one training run of a small "
      "model for a fixed budget (" +
      o.budget + "), with " + std::to_string(o.seeds) + (o.seeds == 1 ? " seed" : " seeds") +
      " per mixer. " + seed_spread_text(all) +
      "; with several seeds every "
      "number carries its 95% t-interval over seeds, and a claim is supported or contradicted "
      "only when Welch's t-test on the per-seed results is significant at 5%. A test accuracy "
      "also carries its 95% binomial interval from the test set's size (Wilson score), the "
      "noise of the test set alone. The budget bounds what a model learns: a cell whose "
      "validation metric still improved by more than " +
      fmt(kConvergenceThreshold, 2) +
      " over the last 20% of its training is marked not converged, and claims resting on it are "
      "inconclusive. The numbers describe these models at this budget, not the mixers at the "
      "papers' scale.";
  if (smoke)
    text += " **This is a smoke test: no verdicts.** The " + o.budget +
            " budget checks that the whole pipeline runs; its cells are far from converged.";
  return {Block::Paragraph, text, "", {}};
}

// The machine writing the report, for the reader who compares its throughputs with their own:
// the CPU's model name (Linux's /proc/cpuinfo) and the logical CPUs it offers.
std::string machine_description() {
  std::string cpu = "an unnamed CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      const size_t from = line.find_first_not_of(" \t", line.find(':') + 1);
      if (from != std::string::npos) cpu = line.substr(from);
      break;
    }
  return cpu + ", " + std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
         " logical CPUs";
}

}  // namespace

// Every mixer on one line, every task's metric and throughput side by side: the table a reader
// compares first (the per-task sections below add parameters, wall time, curves and lengths).
Block summary_table(const StudyOptions& o, const std::vector<StudyTask>& tasks,
                    const std::map<std::string, std::map<std::string, Row>>& all) {
  Block table{Block::Table, "", "", {}};
  std::vector<std::string> header{"mixer"};
  for (const auto& t : tasks) {
    header.push_back(t.name + " " + t.metric + (t.higher_is_better ? " ↑" : " ↓"));
    header.push_back(t.name + " ex/s");
  }
  table.rows.push_back(header);
  for (const auto& m : o.mixers) {
    std::vector<std::string> line{m};
    for (const auto& t : tasks) {
      const Row& r = all.at(t.name).at(m);
      line.push_back(with_interval(r.metric, 3, false) + (r.converged() ? "" : " (nc)"));
      line.push_back(r.throughput.empty() ? "n/a" : fmt(seed_interval(r.throughput).mean, 0));
    }
    table.rows.push_back(line);
  }
  return table;
}

void write_study_report(const StudyOptions& o, const std::vector<StudyTask>& tasks,
                        const std::vector<CellResult>& cells) {
  std::map<std::string, std::map<std::string, Row>> all;
  for (const auto& t : tasks) all[t.name] = rows_of(t, o.mixers, cells);
  std::vector<Block> doc;
  doc.push_back(caveats(o, tasks, all));
  int finished = 0;
  double cell_seconds = 0;
  for (const auto& c : cells) {
    finished += c.done;
    if (c.done) cell_seconds += c.wall_seconds;
  }
  std::string command = "mixlab study --tasks ";
  for (size_t i = 0; i < o.tasks.size(); ++i) command += (i ? "," : "") + o.tasks[i];
  command += " --mixers ";
  for (size_t i = 0; i < o.mixers.size(); ++i) command += (i ? "," : "") + o.mixers[i];
  command += " --budget " + o.budget + " --seeds " + std::to_string(o.seeds) +
             (o.steps > 0 ? " --steps " + std::to_string(o.steps) : "") + " --threads " +
             std::to_string(o.threads) + (o.jobs > 1 ? " --jobs " + std::to_string(o.jobs) : "") +
             " --out " + o.out;
  const std::string together =
      o.jobs > 1
          ? "Cells ran " + std::to_string(o.jobs) + " at a time (--jobs " + std::to_string(o.jobs) +
                "), each with " + std::to_string(o.threads) +
                " thread(s); cells side by side share the machine, so throughputs "
                "compare only within one study run with the same settings."
          : "Cells ran one at a time, each with " + std::to_string(o.threads) + " thread(s).";
  doc.push_back({Block::Paragraph,
                 "Made by `" + command + "`: " + std::to_string(finished) + " of " +
                     std::to_string(cells.size()) +
                     " cells finished. Each cell is a run folder under `cells/` (its training "
                     "log beside it). Throughput is training examples per second as the "
                     "training command reports it; wall time includes data generation and the "
                     "final test. " +
                     together + " The finished cells' wall times add up to " +
                     fmt(cell_seconds / 60.0, 1) + " minutes. The report was written on " +
                     machine_description() +
                     "; cells kept from an earlier run trained wherever that run was. "
                     "In the summary, (nc) marks a "
                     "mixer with a cell that had not converged.",
                 "",
                 {}});
  doc.push_back(summary_table(o, tasks, all));
  for (const auto& t : tasks) {
    const auto& rows = all.at(t.name);
    std::string slug = folder_name(t.name);
    doc.push_back({Block::Heading, "Task: " + t.name, "", {}});
    std::string reference =
        "Chance rate: " +
        (std::isfinite(t.chance) ? fmt(t.chance) + " (" + t.chance_note + ")" : t.chance_note) +
        ". Published: " + (t.published.empty() ? t.published_note : t.published) + ".";
    doc.push_back(
        {Block::Paragraph,
         "Training command: `mixlab " + t.command + " train " + join(t.args, " ") +
             " --mixer M --seed S`" +
             (t.command == "translate" ? "; mixers that cannot be causal get an attention decoder. "
                                       : ". ") +
             reference,
         "",
         {}});
    Block table{Block::Table, "", "", {}};
    std::vector<std::string> header{"mixer", "parameters", "examples/s", "wall time (s)",
                                    "test " + t.metric + (t.higher_is_better ? " ↑" : " ↓")};
    if (is_proportion(t.metric)) header.push_back("binomial 95% (Wilson, test set)");
    header.insert(header.end(), {"converged (late gain)", "causal", "variable length"});
    table.rows.push_back(header);
    std::vector<ChartSeries> scatter;
    for (const auto& m : o.mixers) {
      const Row& r = rows.at(m);
      const MixerInfo& info = MixerRegistry::instance().find(m);
      std::vector<std::string> line{
          m, r.metric.empty() ? "n/a" : std::to_string(r.parameters),
          r.throughput.empty() ? "n/a" : with_interval(r.throughput, 0, false),
          r.wall.empty() ? "n/a" : fmt(seed_interval(r.wall).mean, 1),
          with_interval(r.metric) +
              (r.unfinished ? " (" + std::to_string(r.unfinished) + " unfinished)" : "")};
      if (is_proportion(t.metric))
        line.push_back(binomial_text(r) +
                       (r.test_size > 0 ? " n = " + std::to_string(r.test_size) : ""));
      line.insert(line.end(),
                  {r.convergence(), info.capabilities.causal ? "yes" : "no", length_support(m)});
      table.rows.push_back(line);
      if (!r.metric.empty() && !r.throughput.empty()) {
        const SeedInterval q = seed_interval(r.metric);
        scatter.push_back({m,
                           {seed_interval(r.throughput).mean},
                           {q.mean},
                           {std::isfinite(q.half_width) ? q.half_width : 0.0},
                           ""});
      }
    }
    doc.push_back(table);
    auto curves = learning_curves(t, cells);
    if (!curves.empty()) {
      std::string file = "curves-" + slug + ".svg";
      write_file_atomically(o.out + "/" + file, std::string_view(line_chart_svg(
                                                    t.name + ": training loss (seed 0)",
                                                    "optimizer step", "training loss", curves)));
      doc.push_back({Block::Image, "learning curves, " + t.name, file, {}});
    }
    if (!scatter.empty()) {
      std::string file = "scatter-" + slug + ".svg";
      write_file_atomically(
          o.out + "/" + file,
          std::string_view(scatter_svg(
              t.name + ": test " + t.metric + " against throughput (bars: 95% over seeds)",
              "training examples per second", "test " + t.metric, scatter, true)));
      doc.push_back({Block::Image, "quality against throughput, " + t.name, file, {}});
    }
    if (!t.length_bins.empty()) {
      doc.push_back(
          {Block::Paragraph,
           "**Length generalisation.** Trained on expressions of 16-" +
               std::to_string(t.train_len) +
               " tokens (every mixer built with ℓ = 128 and sinusoidal positions), tested on " +
               std::to_string(kLengthBinSize) +
               " fresh expressions per length bin, so each bin's 95% binomial interval (Wilson, "
               "shown after ±) is at most ±0.03. Mixers that take any length use the same "
               "weights at every length; mixers limited to ℓ use rows and columns of their "
               "ℓ-sized parameters that training never reached.",
           "",
           {}});
      Block lt{Block::Table, "", "", {}};
      std::vector<std::string> header{"mixer", "length support"};
      std::vector<double> mids;
      for (const auto& [a, b] : t.length_bins) {
        header.push_back(std::to_string(a) + "-" + std::to_string(b));
        mids.push_back(0.5 * static_cast<double>(a + b));
      }
      lt.rows.push_back(header);
      std::vector<ChartSeries> lines;
      for (const auto& m : o.mixers) {
        const Row& r = rows.at(m);
        if (r.length.empty() || r.length[0].empty()) continue;
        std::vector<std::string> cells_text{m, length_support(m)};
        ChartSeries s;
        s.name = m + " (" + length_support(m) + ")";
        for (size_t b = 0; b < r.length.size(); ++b) {
          const double mean = seed_interval(r.length[b]).mean;
          const Bounds w = wilson_interval(mean, kLengthBinSize);
          cells_text.push_back(fmt(mean) + " ± " + fmt(0.5 * (w.hi - w.lo)));
          s.x.push_back(mids[b]);
          s.y.push_back(mean);
        }
        lt.rows.push_back(cells_text);
        lines.push_back(s);
      }
      doc.push_back(lt);
      if (!lines.empty()) {
        std::string file = "length-" + slug + ".svg";
        write_file_atomically(o.out + "/" + file,
                              std::string_view(line_chart_svg(
                                  t.name + ": accuracy by length (trained up to " +
                                      std::to_string(t.train_len) + " tokens)",
                                  "expression length (bin middle)", "test accuracy", lines)));
        doc.push_back({Block::Image, "length generalisation, " + t.name, file, {}});
      }
    }
    Block gallery{Block::Links, "", "", {}};
    for (const auto& m : o.mixers) {
      std::string dir = "gallery/" + slug + "/" + folder_name(m);
      if (!fs::exists(o.out + "/" + dir + "/index.html")) continue;
      std::string first;
      if (fs::exists(o.out + "/" + dir + "/heatmaps")) {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(o.out + "/" + dir + "/heatmaps"))
          names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        if (!names.empty()) first = dir + "/heatmaps/" + names[0];
      }
      gallery.rows.push_back(
          {m + ": layer 0, head 0 (all layers and heads: index.html)", dir + "/index.html", first});
    }
    if (!gallery.rows.empty()) {
      doc.push_back({Block::Paragraph,
                     "**Gallery.** The same input through seed 0 of every mixer (`mixlab "
                     "inspect`); each link opens every layer and head.",
                     "",
                     {}});
      doc.push_back(gallery);
    }
  }
  auto claim_blocks = claims(o, tasks, all);
  doc.insert(doc.end(), claim_blocks.begin(), claim_blocks.end());
  write_file_atomically(o.out + "/report.md", std::string_view("# mixlab study (" + o.budget +
                                                               " budget)\n\n" + to_markdown(doc)));
  write_file_atomically(o.out + "/report.html",
                        std::string_view(to_html(doc, "mixlab study (" + o.budget + " budget)")));
}

}  // namespace mixlab::lab
