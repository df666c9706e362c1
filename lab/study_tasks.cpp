// What each study task trains under each budget (tiny, small, full): the training command's
// flags, the metric, the chance rate and the published number beside it, the length bins and
// the input the gallery shows. The grid that runs them is lab/study.cpp.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "lab/errors.h"
#include "lab/study.h"
#include "nn/mixer_registry.h"
#include "train/data/listops.h"

namespace mixlab::lab {

namespace fs = std::filesystem;

namespace {

// The budget's size of each task: {tiny, small, full}.
struct Sizes {
  std::string tiny, small, full;
  const std::string& pick(const std::string& budget) const {
    return budget == "tiny" ? tiny : budget == "small" ? small : full;
  }
};

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string w; ss >> w;) out.push_back(w);
  return out;
}

// The majority class's share of fresh ListOps expressions of the training lengths.
double listops_majority_share(int64_t max_len) {
  ListOpsConfig c;
  c.max_depth = 6;
  c.max_args = 5;
  c.min_len = 16;
  c.max_len = max_len;
  c.count = 5000;
  c.seed = 2000003;
  InMemoryDataset data = listops_dataset(c);
  std::map<int64_t, int64_t> counts;
  int64_t top = 0;
  for (size_t i = 0; i < data.size(); ++i) top = std::max(top, ++counts[data.at(i).label]);
  return data.size() ? static_cast<double>(top) / static_cast<double>(data.size()) : NAN;
}

// The most frequent label's share of a label<TAB>text file (NaN when it has no such line).
double majority_label_share(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, int64_t> counts;
  int64_t total = 0, top = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    top = std::max(top, ++counts[line.substr(0, tab)]);
    ++total;
  }
  return total ? static_cast<double>(top) / static_cast<double>(total) : NAN;
}

}  // namespace

std::vector<std::string> all_study_mixers() {
  std::vector<std::string> out;
  for (const auto& info : MixerRegistry::instance().all())
    out.push_back(info.is_family ? info.name + ":R+V" : info.name);
  return out;
}

StudyTask study_task(const std::string& name, const std::string& budget) {
  StudyTask t;
  t.name = name;
  std::string sizes;
  if (name == "listops") {
    t.command = "classify";
    t.metric = "accuracy";
    // Sinusoidal positions and ℓ = 128 for every mixer, so each can be fed the longer test
    // expressions of the length-generalisation bins.
    t.train_len = budget == "tiny" ? 48 : 64;
    sizes = "--data listops --listops-min-len 16 --listops-len " + std::to_string(t.train_len) +
            " --pos sinusoidal --max-len 128 " +
            Sizes{"--listops-train 20000 --dim 32 --epochs 5 --batch 64 --log-every 20",
                  "--listops-train 20000 --dim 64 --epochs 16 --batch 64 --eval-every 150 "
                  "--log-every 50",
                  "--listops-train 20000 --dim 64 --epochs 10 --log-every 50"}
                .pick(budget);
    // Up to 96 tokens: the generator (depth 6, 5 arguments) rarely draws longer expressions, too
    // rarely for kLengthBinSize distinct ones of 97-128 tokens in its draw budget.
    t.length_bins = {{16, 32}, {33, 48}, {49, 64}, {65, 80}, {81, 96}};
    t.chance = listops_majority_share(t.train_len);
    t.chance_note = "the majority class's share of 5,000 fresh expressions of the training lengths";
    t.published_note =
        "no published setting matches: the Long Range Arena's ListOps (Tay et al., 2021) uses "
        "sequences of up to 2,000 tokens, these are 16-" +
        std::to_string(t.train_len);
    t.inspect_input = "[MAX 3 [MIN 4 7 ] 2 [SM 1 9 ] [MED 5 0 8 ] ]";
  } else if (name == "fashion-mnist") {
    t.command = "classify";
    t.metric = "accuracy";
    sizes = "--data fashion-mnist --patch 7 " +
            Sizes{"--dim 32 --epochs 2 --log-every 20",
                  "--dim 64 --epochs 5 --eval-every 400 --log-every 50",
                  "--dim 128 --layers 4 --epochs 8 --lr 2e-3 --warmup 400 --weight-decay 0.05 "
                  "--label-smoothing 0.1 --log-every 50"}
                .pick(budget);
    t.inspect_image = 0;
    t.chance = 0.1;
    t.chance_note = "ten classes of equal size in the test set";
    t.published_note = "no published setting matches these small patch classifiers (7x7 patches)";
  } else if (name == "scan" || name == "scan-length" || name == "scan-jump") {
    t.command = "translate";
    // A tiny budget's models get no whole SCAN sequence right (exact match 0 for every mixer),
    // so it compares the share of correct tokens instead.
    t.metric = budget == "tiny" ? "token_accuracy" : "exact_match";
    std::string split = name == "scan"          ? "simple"
                        : name == "scan-length" ? "length"
                                                : "addprim_jump";
    sizes = "--data scan --split " + split + " " +
            Sizes{"--dim 32 --epochs 8 --batch 64 --log-every 20",
                  "--dim 64 --epochs 40 --batch 64 --log-every 50",
                  "--dim 64 --epochs 20 --batch 64 --warmup 400 --log-every 50"}
                .pick(budget);
    t.inspect_input = "jump around left twice and walk opposite right";
    if (t.metric == "exact_match") {
      t.chance = 0;
      t.chance_note = "a whole action sequence right by guessing: practically 0";
    } else {
      t.chance = NAN;
      t.chance_note = "not computed for the share of correct tokens";
    }
    // Lake & Baroni (2018), "Generalization without systematicity", ICML: the overall-best
    // sequence-to-sequence model of each experiment, exact match on the test split.
    t.published = split == "simple"   ? "99.7% exact match"
                  : split == "length" ? "13.8% exact match"
                                      : "0.08% exact match";
    t.published += std::string(" (Lake & Baroni, 2018, overall-best seq2seq model, experiment ") +
                   (split == "simple"   ? "1"
                    : split == "length" ? "2"
                                        : "3") +
                   "; larger recurrent models trained far longer)";
  } else if (name == "g2p") {
    t.command = "translate";
    t.metric = "wer";
    t.higher_is_better = false;
    sizes =
        "--data g2p " + Sizes{"--train-limit 5000 --dim 64 --epochs 1 --log-every 5",
                              "--dim 128 --epochs 5 --log-every 20",
                              "--dim 128 --layers 3 --batch 128 --epochs 14 --lr 2e-3 --warmup 800 "
                              "--label-smoothing 0.1 --log-every 50"}
                            .pick(budget);
    t.inspect_input = "mixing";
    t.chance = NAN;
    t.chance_note = "not defined for a word error rate";
    t.published_note = "no published setting matches this split of CMUdict";
  } else if (name.rfind("classify:", 0) == 0 || name.rfind("translate:", 0) == 0) {
    auto colon = name.find(':');
    t.command = name.substr(0, colon);
    std::string path = name.substr(colon + 1);
    if (!fs::is_regular_file(path)) throw UsageError("--tasks " + name + ": no file " + path);
    t.metric = t.command == "classify" ? "accuracy" : "exact_match";
    t.chance = t.command == "classify" ? majority_label_share(path) : 0.0;
    t.chance_note = t.command == "classify" ? "the most frequent label's share of " + path
                                            : "a whole target right by guessing: practically 0";
    t.published_note = "a data set of the user's own";
    sizes = "--data " + path + " " +
            Sizes{"--dim 32 --epochs 2 --log-every 5", "--dim 64 --epochs 5 --log-every 20",
                  "--dim 64 --epochs 20 --log-every 50"}
                .pick(budget);
  } else {
    throw UsageError("--tasks: unknown task '" + name +
                     "'; known: listops, fashion-mnist, scan, scan-length, scan-jump, g2p, "
                     "classify:FILE.tsv (label<TAB>text), translate:FILE.tsv (source<TAB>target)");
  }
  t.args = split_words(sizes);
  t.verdicts = budget != "tiny";
  return t;
}

}  // namespace mixlab::lab
