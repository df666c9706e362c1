// The pieces fit: small models train to a stated accuracy through the real Trainer, DataLoader,
// optimizer and schedule, in seconds.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/random.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train/data/data_loader.h"
#include "lab/plot.h"
#include "train/loop/trainer.h"
#include "tests/test_helpers.h"

using namespace mixlab;

namespace {

// Class = which of 4 token ranges dominates a random sequence of 4..8 tokens.
InMemoryDataset majority_data(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<Example> out;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    int32_t cls = static_cast<int32_t>(gen.below(4));
    int64_t len = 4 + static_cast<int64_t>(gen.below(5));
    for (int64_t t = 0; t < len; ++t) {
      int32_t group = gen.uniform() < 0.7 ? cls : static_cast<int32_t>(gen.below(4));
      e.src.push_back(1 + group * 4 + static_cast<int32_t>(gen.below(4)));
    }
    e.label = cls;
    out.push_back(std::move(e));
  }
  return InMemoryDataset(std::move(out));
}

// Reverse a sequence of 2..6 symbols; targets are [<bos>, reversed..., <eos>].
InMemoryDataset reverse_data(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<Example> out;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    int64_t len = 2 + static_cast<int64_t>(gen.below(5));
    for (int64_t t = 0; t < len; ++t) e.src.push_back(3 + static_cast<int32_t>(gen.below(6)));
    e.tgt.push_back(1);
    for (int64_t t = len - 1; t >= 0; --t) e.tgt.push_back(e.src[t]);
    e.tgt.push_back(2);
    e.src.push_back(2);
    out.push_back(std::move(e));
  }
  return InMemoryDataset(std::move(out));
}

// A one-block translator for reverse_data: sources of up to 8 tokens, targets with <bos>.
ModelConfig reverse_config(int64_t dim) {
  ModelConfig c;
  c.task = ModelTask::Translate;
  c.dim = dim;
  c.heads = 2;
  c.layers = 1;
  c.decoder_layers = 1;
  c.max_len = 8;
  c.tgt_max_len = 9;
  c.vocab = 9;
  c.tgt_vocab = 9;
  c.dropout = 0.0;
  return c;
}

}  // namespace

TEST_CASE("end to end: a small classifier reaches 90 percent on generated data") {
  InMemoryDataset train = majority_data(1200, 1), valid = majority_data(300, 2);
  ModelConfig c;
  c.task = ModelTask::Classify;
  c.dim = 32;
  c.heads = 2;
  c.layers = 1;
  c.max_len = 8;
  c.vocab = 17;
  c.classes = 4;
  c.dropout = 0.0;
  Classifier model(c);
  ClassificationTask task(model, Device::cpu());
  TrainerOptions o;
  o.epochs = 6;
  o.batch_size = 32;
  o.lr = 3e-3;
  o.warmup = 20;
  o.quiet = true;
  o.prefetch = 0;
  Trainer trainer(task, train, &valid, o, TrainingState{});
  TrainResult r = trainer.run();
  CHECK(r.best_valid.at("accuracy") >= 0.9);
}

TEST_CASE("end to end: a small translator learns to reverse sequences") {
  InMemoryDataset train = reverse_data(2000, 3), valid = reverse_data(200, 4);
  Translator model(reverse_config(32));
  TranslationTask task(model, Device::cpu());
  TrainerOptions o;
  o.epochs = 12;
  o.batch_size = 32;
  o.lr = 3e-3;
  o.warmup = 50;
  o.quiet = true;
  o.prefetch = 0;
  auto dir =
      std::filesystem::temp_directory_path() / ("mixlab_e2e_reverse_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  o.out_dir = dir.string();
  o.draw_curves = lab::write_run_curves;
  Trainer trainer(task, train, &valid, o, TrainingState{});
  TrainResult r = trainer.run();
  CHECK(r.best_valid.at("exact_match") >= 0.9);
  CHECK(std::filesystem::exists(dir / "best.safetensors"));
  CHECK(std::filesystem::exists(dir / "metrics.csv"));
  CHECK(std::filesystem::exists(dir / "curves.svg"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("trainer: each optimizer kind builds that optimizer and keeps the CLI name") {
  InMemoryDataset train = reverse_data(16, 7);
  const std::pair<OptimizerKind, const char*> kinds[] = {
      {OptimizerKind::AdamW, "AdamW"}, {OptimizerKind::Adam, "Adam"}, {OptimizerKind::Sgd, "SGD"}};
  for (const auto& entry : kinds) {  // no structured binding: CAPTURE's lambda (clang 14)
    const OptimizerKind kind = entry.first;
    const std::string type = entry.second;
    CAPTURE(type);
    CHECK(parse_optimizer_kind(to_string(kind)) == kind);
    Translator model(reverse_config(8));
    TranslationTask task(model, Device::cpu());
    TrainerOptions o;
    o.optimizer = kind;
    o.max_steps = 1;
    o.batch_size = 8;
    o.quiet = true;
    o.prefetch = 0;
    auto dir = std::filesystem::temp_directory_path() /
               ("mixlab_e2e_optimizer_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    o.out_dir = dir.string();
    Trainer(task, train, nullptr, o, TrainingState{}).run();
    SafetensorsFile saved = load_safetensors((dir / "last.safetensors").string());
    CHECK(Json::parse(saved.metadata.at("optimizer")).at("type").as_string() == type);
    std::filesystem::remove_all(dir);
  }
  CHECK(to_string(OptimizerKind::AdamW) == "adamw");  // the word config.ini keeps
  CHECK_THROWS_WITH_AS(parse_optimizer_kind("adamx"),
                       "optimizer 'adamx' is not one of: adamw, adam, sgd", Error);
}

// On a GPU the trainer reads the loss back every log_every steps, not every step (each read
// waits for the GPU): TrainerOptions::loss_read_every forces that path here. It must train to
// the same numbers, and a diverged run must name the same step as a run that reads every step,
// with no checkpoint written after it.
TEST_CASE("trainer: losses read back every few steps give the same run and the same divergence") {
  InMemoryDataset train = reverse_data(96, 11);
  auto dir = std::filesystem::temp_directory_path() /
             ("mixlab_e2e_read_every_" + std::to_string(::getpid()));
  auto run = [&](int64_t read_every, double lr, double growth) {
    Translator model(reverse_config(16));
    TranslationTask task(model, Device::cpu());
    TrainerOptions o;
    o.epochs = 1;
    o.max_steps = 10;
    o.batch_size = 8;
    o.lr = lr;
    o.warmup = 0;
    o.max_loss_growth = growth;
    o.log_every = 3;
    o.loss_read_every = read_every;
    o.quiet = true;
    o.prefetch = 0;
    std::filesystem::remove_all(dir);
    o.out_dir = dir.string();
    Trainer trainer(task, train, nullptr, o, TrainingState{});
    TrainResult r = trainer.run();
    std::ifstream in(dir / "metrics.csv");
    std::stringstream metrics;
    metrics << in.rdbuf();
    return std::make_pair(r, metrics.str());
  };
  SUBCASE("the same losses, log rows and result") {
    auto [every, every_log] = run(1, 3e-3, 1e6);
    auto [late, late_log] = run(4, 3e-3, 1e6);
    CHECK(late.last_train_loss == every.last_train_loss);
    // The rows' cells up to the train rows' window loss (time and speed differ).
    auto rows = [](const std::string& csv) {
      std::string kept;
      std::istringstream in(csv);
      size_t keep = 0;
      for (std::string line; std::getline(in, line);) {
        std::vector<std::string> cells;
        std::istringstream cs(line);
        for (std::string cell; std::getline(cs, cell, ',');) cells.push_back(cell);
        if (keep == 0)
          keep = std::find(cells.begin(), cells.end(), kTrainLossColumn) - cells.begin() + 1;
        for (size_t i = 0; i < keep && i < cells.size(); ++i) kept += cells[i] + ",";
        kept += "\n";
      }
      return kept;
    };
    CHECK(rows(late_log) == rows(every_log));
    // The header, the windows ending at steps 3, 6 and 9, and the last window (step 10).
    CHECK(std::count(every_log.begin(), every_log.end(), '\n') == 5);
  }
  SUBCASE("a diverged run names the same step and writes no checkpoint after it") {
    // A loss above the first one counts as divergence here; a large learning rate gets there.
    auto failure = [&](int64_t read_every) {
      try {
        run(read_every, 0.5, 1.0);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    const std::string at_once = failure(1), later = failure(4);
    INFO(at_once);
    INFO(later);
    REQUIRE(at_once.find("training diverged: the loss is ") == 0);
    const size_t at = at_once.find(" at step ");
    REQUIRE(at != std::string::npos);
    const std::string step = at_once.substr(at, at_once.find(',', at) - at);  // " at step N"
    CHECK(later.find(step + ",") != std::string::npos);
    CHECK(at_once.find("stopped before the update") != std::string::npos);
    CHECK(later.find("stopped when it was read back at step ") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "last.safetensors"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "translation: the evaluated loss is plain cross-entropy whatever the training smoothing") {
  InMemoryDataset data = reverse_data(40, 5);
  Translator model(reverse_config(16));
  TranslationTask plain(model, Device::cpu()), smoothed(model, Device::cpu(), 0.3);
  DataLoaderOptions lo;
  lo.batch_size = 8;
  lo.shuffle = false;
  DataLoader loader(data, lo);
  loader.start_epoch(0);
  Batch b;
  REQUIRE(loader.next(b));
  // Training differs (the smoothed loss of an untrained model is not the plain one) ...
  CHECK(smoothed.loss(b).item() != doctest::Approx(plain.loss(b).item()));
  // ... evaluation does not.
  CHECK(smoothed.evaluate(data).at("loss") == doctest::Approx(plain.evaluate(data).at("loss")));
}

TEST_CASE("translation: an ensemble's loss is the cross-entropy of the models' mean probability") {
  InMemoryDataset data = reverse_data(40, 6);
  Translator a(reverse_config(16));
  ModelConfig other = reverse_config(8);
  other.seed = 9;
  Translator b(other);
  TranslationTask alone(a, Device::cpu()), alone_b(b, Device::cpu()), twice(a, Device::cpu()),
      pair(a, Device::cpu());
  twice.set_ensemble({&a});
  pair.set_ensemble({&b});
  double la = alone.evaluate(data).at("loss"), lb = alone_b.evaluate(data).at("loss");
  CHECK(twice.evaluate(data).at("loss") == doctest::Approx(la).epsilon(1e-5));
  // -log((p_a + p_b) / 2) <= (-log p_a - log p_b) / 2 token by token (Jensen), strictly when the
  // models differ.
  CHECK(pair.evaluate(data).at("loss") < (la + lb) / 2);
}
