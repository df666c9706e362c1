// `mixlab study`: trains a grid of (task x mixer x seed), one run folder per cell, and writes a
// report comparing the mixers (lab/study_report.cpp). `mixlab study` (apps/study.cpp) parses the
// flags into StudyOptions and calls run_study().
//
// Cells run as child processes of the same executable (`mixlab classify|translate train ...
// --out CELL`), so a crash in one cell cannot take the study down, and each cell is an ordinary
// run folder that `inspect`, `eval` and `--resume` understand. A cell is finished when its
// marker OUT/cells/<task>/<mixer>/seed-<k>.done.json exists (folder_name() of each): it is written
// after the child exits 0 and holds the cell's measurements and settings (its training command
// without --out). On a rerun finished cells are skipped; one of other settings (another budget,
// --steps or --threads) is refused, naming both, so that no report mixes two grids;
// a cell without a marker (interrupted, killed, failed) is trained again from scratch after its run
// folder is removed (the marker and the log live beside the run folder, never inside it).
//
// The study and its cells stop together. Each cell runs in a process group of its own, so a
// Ctrl-C at the terminal reaches only the study, which passes the signal on once to every
// running cell (each saves its last checkpoint and exits) and then exits 130 (SIGINT) or 143
// (SIGTERM). A cell whose study dies without a word (SIGKILL) gets SIGTERM from the kernel
// (PR_SET_PDEATHSIG) and stops the same way. A cell holds a lock on OUT/cells/.../seed-<k>.lock
// for as long as its process lives, so a rerun waits for a cell of an earlier study to end
// before it trains that cell again, and OUT/.study.lock keeps a second study out of the folder.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mixlab::lab {

struct StudyTask {
  std::string name;     // "listops", "scan", "scan-length", "fashion-mnist", "g2p", "classify:F"
  std::string command;  // "classify" or "translate"
  std::vector<std::string> args;  // data and budget flags for `COMMAND train`
  std::string metric;             // the test metric reported ("accuracy", "exact_match", "wer")
  bool higher_is_better = true;
  std::string inspect_input;   // the gallery's input text (empty: none)
  int64_t inspect_image = -1;  // image tasks: the gallery's test image
  // Length generalisation (ListOps): trained on lengths up to train_len, tested on these bins.
  int64_t train_len = 0;
  std::vector<std::pair<int64_t, int64_t>> length_bins;
  // What the numbers are read against: the chance rate of the metric (NaN: not known) and how
  // it was found, and a published number for the same setting with its source (empty: none
  // matches; `published_note` then says why).
  double chance = 0;
  std::string chance_note, published, published_note;
  // The budget checks the papers' claims (false: a smoke test, no verdicts).
  bool verdicts = true;
};

// Fresh ListOps expressions per length bin: enough that a bin's 95% binomial interval is at most
// ±0.03 at any accuracy (Wilson, p = 0.5: 1.96 · sqrt(0.25 / 1100) = 0.0295).
constexpr int64_t kLengthBinSize = 1100;

struct CellResult {
  std::string task, mixer;
  int seed = 0;
  bool done = false;
  bool failed = false;  // its training exited non-zero in this run of the study
  int exit_code = 0;
  std::string dir;  // the run folder
  // The training command's settings, without its --out (the marker records them: a finished
  // cell counts only for the settings it was trained with).
  std::string settings;
  double wall_seconds = 0, throughput = 0, metric = 0;
  bool has_metric = false, has_throughput = false;
  int64_t parameters = 0;
  std::vector<double> length_accuracy;  // one per StudyTask::length_bins
  int64_t test_size = 0;                // examples in the test set (0: not known)
  // The validation metric's gain over the last 20% of training (lab/study_stats.h; NaN: not
  // known): above kConvergenceThreshold the cell is "not converged".
  double late_improvement = 0;
};

struct StudyOptions {
  std::vector<std::string> tasks, mixers;
  std::string budget = "tiny";
  int seeds = 0;  // 0: the budget's (1 for tiny, a smoke test; 3 for the budgets with verdicts)
  std::string out;
  int64_t steps = 0;  // 0: the budget's
  int threads = 1;    // per training process
  int jobs = 1;       // training processes at a time
};

StudyTask study_task(const std::string& name, const std::string& budget);
// A cell's settings: its training command without the --out pair, as one string (recorded in
// its marker; a finished cell counts only for these settings).
std::string cell_settings(const StudyOptions& o, const StudyTask& t, const std::string& mixer,
                          int seed);
// Every registered mixer (families by one member: synth-mix:R+V).
std::vector<std::string> all_study_mixers();
// A task's or mixer's folder name, unique by construction: the name itself when it is only
// letters, digits, '-' and '_', else its slug (other characters as '_') + '.' + 8 hex digits of a
// hash (FNV-1a) of the full name: "classify:a.tsv" and "classify:a_tsv" get two folders. A '.'
// never appears in a slug, so a hashed name never equals a plain one.
std::string folder_name(const std::string& name);

// Writes OUT/report.md, OUT/report.html and the pictures from the finished cells.
void write_study_report(const StudyOptions& options, const std::vector<StudyTask>& tasks,
                        const std::vector<CellResult>& cells);

// Checks the lists (UsageError), trains every unfinished cell, then writes the gallery and the
// report; Interrupted when a signal stopped it.
void run_study(const StudyOptions& options);

}  // namespace mixlab::lab
