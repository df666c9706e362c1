// The study's report: one table per task, learning curves, quality against throughput, length
// generalisation, a gallery of mixing matrices, and the papers' claims checked against the
// numbers. Written twice from one list of blocks: report.md and report.html.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "lab/plot.h"
#include "lab/study.h"
#include "lab/svg.h"
#include "core/strings.h"
#include "nn/mixer_registry.h"
#include "io/atomic_file.h"
#include "io/run_log.h"

namespace mixlab::lab {

namespace fs = std::filesystem;

namespace {

// ---- a tiny document model, rendered as Markdown and as HTML ----

struct Block {
  enum Kind { Heading, Paragraph, Table, Image, List, Links } kind;
  std::string text;                            // heading / paragraph / image caption
  std::string path;                            // image path (relative to the report)
  std::vector<std::vector<std::string>> rows;  // table (first row = header), list items, links
};

std::string to_markdown(const std::vector<Block>& blocks) {
  std::string md;
  for (const auto& b : blocks) {
    switch (b.kind) {
      case Block::Heading:
        md += "\n## " + b.text + "\n\n";
        break;
      case Block::Paragraph:
        md += b.text + "\n\n";
        break;
      case Block::Table:
        for (size_t r = 0; r < b.rows.size(); ++r) {
          md += "|";
          for (const auto& c : b.rows[r]) md += " " + c + " |";
          md += "\n";
          if (r == 0) {
            md += "|";
            for (size_t c = 0; c < b.rows[0].size(); ++c) md += "---|";
            md += "\n";
          }
        }
        md += "\n";
        break;
      case Block::Image:
        md += "![" + b.text + "](" + b.path + ")\n\n";
        break;
      case Block::List:
        for (const auto& item : b.rows) md += "- " + item[0] + "\n";
        md += "\n";
        break;
      case Block::Links:
        for (const auto& l : b.rows) md += "- [" + l[0] + "](" + l[1] + ")\n";
        md += "\n";
        break;
    }
  }
  return md;
}

// Markdown's **bold** as <b> (the only markup the blocks use), the rest escaped.
std::string inline_html(const std::string& s) {
  std::string e = xml_escape(s), out;
  bool open = false;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e.compare(i, 2, "**") == 0) {
      out += open ? "</b>" : "<b>";
      open = !open;
      ++i;
    } else {
      out += e[i];
    }
  }
  return out + (open ? "</b>" : "");
}

std::string to_html(const std::vector<Block>& blocks, const std::string& title) {
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" +
                  xml_escape(title) +
                  "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1400px}"
                  "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;"
                  "padding:3px 8px;font-size:13px}th{background:#f2f2f2}img{max-width:100%}"
                  ".gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,"
                  "1fr));gap:12px}</style></head><body>\n<h1>" +
                  xml_escape(title) + "</h1>\n";
  for (const auto& b : blocks) {
    switch (b.kind) {
      case Block::Heading:
        h += "<h2>" + xml_escape(b.text) + "</h2>\n";
        break;
      case Block::Paragraph:
        h += "<p>" + inline_html(b.text) + "</p>\n";
        break;
      case Block::Table:
        h += "<table>\n";
        for (size_t r = 0; r < b.rows.size(); ++r) {
          h += "<tr>";
          for (const auto& c : b.rows[r])
            h += (r == 0 ? "<th>" : "<td>") + inline_html(c) + (r == 0 ? "</th>" : "</td>");
          h += "</tr>\n";
        }
        h += "</table>\n";
        break;
      case Block::Image:
        h += "<p><img src=\"" + b.path + "\" alt=\"" + xml_escape(b.text) + "\"></p>\n";
        break;
      case Block::List:
        h += "<ul>\n";
        for (const auto& item : b.rows) h += "<li>" + inline_html(item[0]) + "</li>\n";
        h += "</ul>\n";
        break;
      case Block::Links:
        h += "<div class=\"gallery\">\n";
        for (const auto& l : b.rows)
          h += "<figure><a href=\"" + l[1] + "\">" +
               (l.size() > 2 ? "<img src=\"" + l[2] + "\">" : "") + "</a><figcaption>" +
               xml_escape(l[0]) + "</figcaption></figure>\n";
        h += "</div>\n";
        break;
    }
  }
  return h + "</body></html>\n";
}

// ---- statistics over seeds ----

struct Stats {
  int n = 0;
  double mean = NAN, sd = NAN;
};

Stats stats(const std::vector<double>& v) {
  Stats s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / s.n;
  if (s.n > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(ss / (s.n - 1));
  }
  return s;
}

std::string fmt(double v, int digits = 3) {
  if (!std::isfinite(v)) return "n/a";
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

std::string with_spread(const Stats& s) {
  if (s.n == 0) return "n/a";
  return fmt(s.mean) + (s.n > 1 ? " ± " + fmt(s.sd) : "") + " (" + std::to_string(s.n) +
         (s.n == 1 ? " seed)" : " seeds)");
}

struct Row {  // one (task, mixer) over its seeds
  std::string mixer;
  Stats metric, throughput, wall;
  int64_t parameters = 0;
  std::vector<Stats> length;
  int failed = 0;
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
    std::vector<double> metric, speed, wall;
    std::vector<std::vector<double>> lengths(t.length_bins.size());
    for (const auto& c : cells) {
      if (c.task != t.name || c.mixer != m) continue;
      if (!c.done) {
        ++r.failed;
        continue;
      }
      if (c.has_metric) metric.push_back(c.metric);
      if (c.has_throughput) speed.push_back(c.throughput);
      wall.push_back(c.wall_seconds);
      r.parameters = c.parameters;
      for (size_t b = 0; b < c.length_accuracy.size() && b < lengths.size(); ++b)
        lengths[b].push_back(c.length_accuracy[b]);
    }
    r.metric = stats(metric);
    r.throughput = stats(speed);
    r.wall = stats(wall);
    for (const auto& l : lengths) r.length.push_back(stats(l));
    out[m] = r;
  }
  return out;
}

// ---- the papers' claims ----

struct Verdicts {
  int supported = 0, contradicted = 0;
  std::vector<std::string> evidence;
  std::string verdict() const {
    if (supported + contradicted == 0) return "**not measured**";
    if (contradicted == 0) return "**supported**";
    if (supported == 0) return "**contradicted**";
    return "**mixed** (supported on " + std::to_string(supported) + ", contradicted on " +
           std::to_string(contradicted) + " tasks)";
  }
};

const Row* find_row(const std::map<std::string, Row>& rows, const std::string& m) {
  auto it = rows.find(m);
  return it == rows.end() || it->second.metric.n == 0 ? nullptr : &it->second;
}

// a at least as good as b on the task's metric.
bool at_least(const StudyTask& t, double a, double b) {
  return t.higher_is_better ? a >= b : a <= b;
}

std::string compare_text(const StudyTask& t, const std::string& a, const Row& ra,
                         const std::string& b, const Row& rb) {
  std::string s = t.name + ": " + a + " " + with_spread(ra.metric) + " vs " + b + " " +
                  with_spread(rb.metric) + " (test " + t.metric + ")";
  double diff = std::abs(ra.metric.mean - rb.metric.mean);
  if (diff == 0.0) return s + ", equal";
  if (ra.metric.n > 1 && rb.metric.n > 1 && diff <= std::max(ra.metric.sd, rb.metric.sd))
    s += ", a difference within the seeds' spread";
  return s;
}

std::vector<Block> claims(const std::vector<StudyTask>& tasks,
                          const std::map<std::string, std::map<std::string, Row>>& all) {
  std::vector<std::vector<std::string>> items;
  auto add = [&](const std::string& claim, const Verdicts& v, const std::string& note,
                 const std::string& needs) {
    std::string text = claim + ": " + v.verdict() + ".";
    if (v.evidence.empty()) text += " It needs " + needs + " in the study.";
    for (const auto& e : v.evidence) text += " " + e + ".";
    if (!note.empty()) text += " " + note;
    items.push_back({text});
  };
  auto pairwise = [&](const std::string& better, const std::string& worse, bool only_scan) {
    Verdicts v;
    for (const auto& t : tasks) {
      if (only_scan && t.name.rfind("scan", 0) != 0) continue;
      const auto& rows = all.at(t.name);
      const Row *a = find_row(rows, better), *b = find_row(rows, worse);
      if (!a || !b) continue;
      bool ok = at_least(t, a->metric.mean, b->metric.mean);
      ++(ok ? v.supported : v.contradicted);
      v.evidence.push_back(compare_text(t, better, *a, worse, *b));
    }
    return v;
  };
  add("Synthesizer: the mixture R+V (synth-mix:R+V) is at least as good as V alone (dot-product "
      "attention)",
      pairwise("synth-mix:R+V", "attention", false), "", "synth-mix:R+V and attention");
  add("Synthesizer: Fix (synth-fixed, a frozen random matrix) is below R (synth-random, trained)",
      pairwise("synth-random", "synth-fixed", false),
      "(counted as supported when R is at least as good as Fix)", "synth-random and synth-fixed");
  {
    Verdicts v;
    for (const auto& t : tasks) {
      if (t.name.rfind("scan", 0) != 0) continue;
      const auto& rows = all.at(t.name);
      const Row* att = find_row(rows, "attention");
      if (!att) continue;
      for (const char* m : {"synth-random", "synth-fixed", "resmlp", "fnet"}) {
        const Row* r = find_row(rows, m);
        if (!r) continue;
        bool behind = !at_least(t, r->metric.mean, att->metric.mean);
        ++(behind ? v.supported : v.contradicted);
        v.evidence.push_back(compare_text(t, m, *r, "attention", *att));
      }
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
        if (!f || !r) continue;
        double loss =
            t.higher_is_better ? r->metric.mean - f->metric.mean : f->metric.mean - r->metric.mean;
        bool ok = f->parameters < r->parameters && loss <= kLittle;
        ++(ok ? v.supported : v.contradicted);
        v.evidence.push_back(compare_text(t, factorised, *f, full, *r) + "; parameters " +
                             std::to_string(f->parameters) + " vs " +
                             std::to_string(r->parameters));
      }
    }
    add("The factorised synthesizers trade little quality for fewer parameters", v,
        "(\"little\": at most 0.02 of the metric lost, with fewer parameters)",
        "synth-frandom with synth-random, or synth-fdense with synth-dense");
  }
  {
    Verdicts v;
    const std::vector<std::string> fast = {"fnet", "mlp-mixer", "resmlp", "ffonly"};
    for (const auto& t : tasks) {
      const auto& rows = all.at(t.name);
      std::vector<std::pair<double, std::string>> ranked;
      for (const auto& [m, r] : rows)
        if (r.throughput.n > 0) ranked.push_back({r.throughput.mean, m});
      std::sort(ranked.rbegin(), ranked.rend());
      auto att = rows.find("attention");
      if (ranked.empty() || att == rows.end() || att->second.throughput.n == 0) continue;
      std::string ranks;
      bool all_faster = true, any = false;
      for (size_t i = 0; i < ranked.size(); ++i) {
        if (std::find(fast.begin(), fast.end(), ranked[i].second) == fast.end()) continue;
        any = true;
        all_faster = all_faster && ranked[i].first > att->second.throughput.mean;
        ranks += (ranks.empty() ? "" : ", ") + ranked[i].second + " #" + std::to_string(i + 1) +
                 " (" + fmt(ranked[i].first, 0) + "/s)";
      }
      if (!any) continue;
      bool top = std::find(fast.begin(), fast.end(), ranked[0].second) != fast.end();
      ++((all_faster && top) ? v.supported : v.contradicted);
      v.evidence.push_back(t.name + ": " + ranks + " of " + std::to_string(ranked.size()) +
                           "; attention " + fmt(att->second.throughput.mean, 0) + "/s; fastest " +
                           ranked[0].second);
    }
    add("FNet and the MLP mixers (mlp-mixer, resmlp, ffonly) train fastest per example", v,
        "(supported on a task when each of them measured is faster than attention and the "
        "fastest mixer is one of them; training examples per second, cells run one after "
        "another on a possibly shared machine)",
        "attention and at least one of fnet, mlp-mixer, resmlp, ffonly");
  }
  std::vector<Block> out;
  out.push_back({Block::Heading, "The papers' claims, checked", "", {}});
  out.push_back({Block::Paragraph,
                 "Each claim is stated as supported, contradicted, mixed or not measured by "
                 "this study's cells, with the numbers (mean ± sample standard deviation over "
                 "seeds). A tiny budget trains for minutes: its verdicts describe these short "
                 "runs, not the papers' settings.",
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
      line.push_back(r.metric.n
                         ? fmt(r.metric.mean) + (r.metric.n > 1 ? " ± " + fmt(r.metric.sd) : "")
                         : "n/a");
      line.push_back(fmt(r.throughput.mean, 0));
    }
    table.rows.push_back(line);
  }
  return table;
}

void write_study_report(const StudyOptions& o, const std::vector<StudyTask>& tasks,
                        const std::vector<CellResult>& cells) {
  std::vector<Block> doc;
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
  doc.push_back(
      {Block::Paragraph,
       "Made by `" + command + "`: " + std::to_string(finished) + " of " +
           std::to_string(cells.size()) +
           " cells finished. Each cell is a run folder under `cells/` (its training "
           "log beside it). Throughput is training examples per second as the "
           "training command reports it; wall time includes data generation and the "
           "final test. Cells trained side by side (--jobs) share the machine. The finished "
           "cells' wall times add up to " +
           fmt(cell_seconds / 60.0, 1) + " minutes" +
           (o.jobs > 1 ? " (" + std::to_string(o.jobs) + " at a time)" : "") + ".",
       "",
       {}});
  std::map<std::string, std::map<std::string, Row>> all;
  for (const auto& t : tasks) all[t.name] = rows_of(t, o.mixers, cells);
  doc.push_back(summary_table(o, tasks, all));
  for (const auto& t : tasks) {
    const auto& rows = all.at(t.name);
    std::string slug = folder_name(t.name);
    doc.push_back({Block::Heading, "Task: " + t.name, "", {}});
    doc.push_back(
        {Block::Paragraph,
         "Training command: `mixlab " + t.command + " train " + join(t.args, " ") +
             " --mixer M --seed S`" +
             (t.command == "translate" ? "; mixers that cannot be causal get an attention decoder."
                                       : "."),
         "",
         {}});
    Block table{Block::Table, "", "", {}};
    table.rows.push_back({"mixer", "parameters", "examples/s", "wall time (s)",
                          "test " + t.metric + (t.higher_is_better ? " ↑" : " ↓"), "causal",
                          "variable length"});
    std::vector<ChartSeries> scatter;
    for (const auto& m : o.mixers) {
      const Row& r = rows.at(m);
      const MixerInfo& info = MixerRegistry::instance().find(m);
      table.rows.push_back({m, r.metric.n ? std::to_string(r.parameters) : "n/a",
                            fmt(r.throughput.mean, 0), fmt(r.wall.mean, 1),
                            with_spread(r.metric) +
                                (r.failed ? " (" + std::to_string(r.failed) + " unfinished)" : ""),
                            info.capabilities.causal ? "yes" : "no", length_support(m)});
      if (r.metric.n && r.throughput.n) {
        ChartSeries p;
        p.name = m;
        p.x = {r.throughput.mean};
        p.y = {r.metric.mean};
        p.y_err = {std::isfinite(r.metric.sd) ? r.metric.sd : 0.0};
        scatter.push_back(p);
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
          std::string_view(scatter_svg(t.name + ": test " + t.metric + " against throughput",
                                       "training examples per second", "test " + t.metric, scatter,
                                       true)));
      doc.push_back({Block::Image, "quality against throughput, " + t.name, file, {}});
    }
    if (!t.length_bins.empty()) {
      doc.push_back({Block::Paragraph,
                     "**Length generalisation.** Trained on expressions of 16-" +
                         std::to_string(t.train_len) +
                         " tokens (every mixer built with ℓ = 128 and sinusoidal positions), "
                         "tested on 100 fresh expressions per length bin. Mixers that take any "
                         "length use the same weights at every length; mixers limited to ℓ use "
                         "rows and columns of their ℓ-sized parameters that training never "
                         "reached.",
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
        if (r.length.empty() || r.length[0].n == 0) continue;
        std::vector<std::string> cells_text{m, length_support(m)};
        ChartSeries s;
        s.name = m + " (" + length_support(m) + ")";
        for (size_t b = 0; b < r.length.size(); ++b) {
          cells_text.push_back(fmt(r.length[b].mean));
          s.x.push_back(mids[b]);
          s.y.push_back(r.length[b].mean);
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
  auto claim_blocks = claims(tasks, all);
  doc.insert(doc.end(), claim_blocks.begin(), claim_blocks.end());
  write_file_atomically(o.out + "/report.md", std::string_view("# mixlab study (" + o.budget +
                                                               " budget)\n\n" + to_markdown(doc)));
  write_file_atomically(o.out + "/report.html",
                        std::string_view(to_html(doc, "mixlab study (" + o.budget + " budget)")));
}

}  // namespace mixlab::lab
