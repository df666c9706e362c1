// What metrics.csv and best.safetensors say about a run: a train row's loss is the mean of the
// step losses in its log window (recomputed here from a run that logs every step), a tie in the
// selection metric goes to the lower validation loss, and the checkpoint records which metric
// and step chose it.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/random.h"
#include "io/json.h"
#include "io/run_log.h"
#include "tests/temp_dir.h"
#include "train/loop/tasks.h"
#include "train/loop/trainer.h"
#include "train/run/checkpoint.h"

using namespace mixlab;

namespace {

// Class = which of 3 token ranges dominates a sequence of 3..6 tokens.
InMemoryDataset logging_data(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<Example> out;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    e.label = static_cast<int32_t>(gen.below(3));
    const int64_t len = 3 + static_cast<int64_t>(gen.below(4));
    for (int64_t t = 0; t < len; ++t) {
      const int32_t group = gen.uniform() < 0.7 ? e.label : static_cast<int32_t>(gen.below(3));
      e.src.push_back(1 + group * 3 + static_cast<int32_t>(gen.below(3)));
    }
    out.push_back(std::move(e));
  }
  return InMemoryDataset(std::move(out));
}

ModelConfig logging_config() {
  ModelConfig c;
  c.task = ModelTask::Classify;
  c.dim = 8;
  c.heads = 2;
  c.layers = 1;
  c.max_len = 6;
  c.vocab = 10;
  c.classes = 3;
  c.dropout = 0.0;
  return c;
}

TrainerOptions logging_options(const std::string& out, int64_t steps, int64_t log_every) {
  TrainerOptions o;
  o.epochs = 100;
  o.max_steps = steps;
  o.batch_size = 8;
  o.lr = 3e-3;
  o.warmup = 2;
  o.log_every = log_every;
  o.quiet = true;
  o.prefetch = 0;
  o.seed = 5;
  o.out_dir = out;
  return o;
}

// The train rows' window losses, by step.
std::map<int64_t, double> train_losses(const std::string& dir) {
  std::map<int64_t, double> out;
  for (const MetricsRow& row : read_metrics_csv(dir + "/metrics.csv").rows) {
    if (row.phase != "train") continue;
    CHECK_FALSE(row.values.count("loss"));  // the window's loss has its own column
    out[row.step] = row.values.at(kTrainLossColumn);
  }
  return out;
}

// A classifier whose validation metrics are scripted: accuracy always `accuracy`, the loss the
// next of `losses` (the last one repeated).
class ScriptedTask : public ClassificationTask {
 public:
  ScriptedTask(Classifier& model, std::vector<double> losses)
      : ClassificationTask(model, Device::cpu()), losses_(std::move(losses)) {}
  std::map<std::string, double> evaluate(const Dataset&) override {
    const double loss = losses_[std::min(calls_++, losses_.size() - 1)];
    return {{"loss", loss}, {"accuracy", 0.5}};
  }

 private:
  std::vector<double> losses_;
  size_t calls_ = 0;
};

}  // namespace

TEST_CASE("trainer logging: a train row's loss is the mean of its window's step losses") {
  testing::TempDir tmp;
  // 40 examples in batches of 8: 5 steps an epoch, so windows of 3 straddle epoch ends.
  const InMemoryDataset train = logging_data(40, 1);
  auto run = [&](const std::string& dir, int64_t log_every) {
    manual_seed(9);
    Classifier model(logging_config());
    ClassificationTask task(model, Device::cpu());
    Trainer trainer(task, train, nullptr, logging_options(dir, 11, log_every), TrainingState{});
    return trainer.run();
  };
  const TrainResult every = run(tmp.file("every"), 1);
  const TrainResult windows = run(tmp.file("windows"), 3);
  const std::map<int64_t, double> step_loss = train_losses(tmp.file("every"));
  REQUIRE(step_loss.size() == 11);
  const std::map<int64_t, double> logged = train_losses(tmp.file("windows"));
  // Rows at 3, 6 and 9, and the last window (steps 10 and 11) at the end of the run.
  std::vector<int64_t> steps;
  for (const auto& [step, loss] : logged) steps.push_back(step);
  CHECK(steps == std::vector<int64_t>{3, 6, 9, 11});
  int64_t previous = 0;
  for (const auto& row : logged) {
    const int64_t step = row.first;  // not a structured binding: INFO captures it (clang, C++17)
    const double loss = row.second;
    double sum = 0;
    for (int64_t s = previous + 1; s <= step; ++s) sum += step_loss.at(s);
    const double mean = sum / static_cast<double>(step - previous);
    INFO("row at step " << step);
    CHECK(loss == doctest::Approx(mean).epsilon(1e-12));
    previous = step;
  }
  // The summary's final train loss is the last window's, as logged.
  CHECK(windows.last_train_loss == logged.at(11));
  CHECK(every.last_train_loss == step_loss.at(11));
  // The header names the column.
  const std::vector<std::string> columns =
      read_metrics_csv(tmp.file("windows/metrics.csv")).columns;
  CHECK(std::find(columns.begin(), columns.end(), kTrainLossColumn) != columns.end());
}

TEST_CASE("trainer logging: a tie in the metric goes to the lower validation loss") {
  testing::TempDir tmp;
  const InMemoryDataset train = logging_data(40, 2), valid = logging_data(8, 3);
  manual_seed(4);
  Classifier model(logging_config());
  // Evaluations at steps 2, 4 and 6 (every 2 steps), then at the end (step 6 again): accuracy
  // ties throughout; step 4 has the lowest loss. The later step 6 ties on both and wins only
  // when its loss equals the best one: here it is higher.
  ScriptedTask task(model, {3.0, 2.0, 2.5, 2.5});
  TrainerOptions o = logging_options(tmp.path(), 6, 2);
  o.eval_every = 2;
  Trainer trainer(task, train, &valid, o, TrainingState{});
  const TrainResult r = trainer.run();
  CHECK(r.best_step == 4);
  CHECK(r.best_metric == "accuracy");
  CHECK(r.best_valid.at("loss") == 2.0);
  // best.safetensors records what chose it.
  Classifier reloaded(logging_config());
  const std::map<std::string, std::string> meta =
      load_weights(Trainer::best_checkpoint(tmp.path()), reloaded);
  const Json extra = Json::parse(meta.at("extra"));
  CHECK(extra.at("best_step").as_string() == "4");
  CHECK(extra.at("best_metric_name").as_string() == "accuracy");
  CHECK(std::stod(extra.at("best_valid_loss").as_string()) == 2.0);
  // The test row names the step of the model it scored.
  trainer.log_test({{"loss", 1.0}, {"accuracy", 0.5}}, r.best_step);
  const MetricsTable table = read_metrics_csv(Trainer::metrics_csv(tmp.path()));
  REQUIRE_FALSE(table.rows.empty());
  CHECK(table.rows.back().phase == "test");
  CHECK(table.rows.back().step == 4);
}

TEST_CASE("trainer logging: an equal metric and loss go to the later step") {
  testing::TempDir tmp;
  const InMemoryDataset train = logging_data(40, 2), valid = logging_data(8, 3);
  manual_seed(4);
  Classifier model(logging_config());
  ScriptedTask task(model, {2.0, 2.0, 3.0});
  TrainerOptions o = logging_options(tmp.path(), 6, 2);
  o.eval_every = 2;
  Trainer trainer(task, train, &valid, o, TrainingState{});
  CHECK(trainer.run().best_step == 4);
}

TEST_CASE("trainer logging: a resumed run keeps the best's step and breaks ties as before") {
  testing::TempDir tmp;
  const InMemoryDataset train = logging_data(40, 2), valid = logging_data(8, 3);
  // Steps 2 and 4 in a first run (best: step 2, its loss 1/3 stored exactly), steps 6 and 8 in
  // the resumed one, scored as `resumed` says: the best step at the end.
  auto best_after_resume = [&](const std::string& dir, std::vector<double> resumed) {
    manual_seed(4);
    {
      Classifier model(logging_config());
      ScriptedTask task(model, {1.0 / 3.0, 0.5});
      TrainerOptions o = logging_options(dir, 4, 2);
      o.eval_every = 2;
      Trainer trainer(task, train, &valid, o, TrainingState{});
      REQUIRE(trainer.run().best_step == 2);
    }
    Classifier model(logging_config());
    ScriptedTask task(model, std::move(resumed));
    TrainerOptions o = logging_options(dir, 8, 2);
    o.eval_every = 2;
    o.resume = true;
    Trainer trainer(task, train, &valid, o, TrainingState{});
    return trainer.run().best_step;
  };
  // Higher losses at an equal accuracy: step 2 stays the best, across the resume.
  CHECK(best_after_resume(tmp.file("higher"), {0.4, 0.5}) == 2);
  // The same loss as step 2's, to the last bit: the later step.
  CHECK(best_after_resume(tmp.file("equal"), {0.4, 1.0 / 3.0}) == 8);
}

TEST_CASE(
    "trainer logging: an image batch's tokens are its patches, a class token not among them") {
  ModelConfig c;
  c.task = ModelTask::Classify;
  c.input = InputKind::Image;
  c.dim = 8;
  c.heads = 2;
  c.layers = 1;
  c.classes = 3;
  c.max_len = 49;  // 4x4 patches of a 28x28 image
  Batch images;
  images.size = 3;
  images.features.assign(3 * 28 * 28, 0.5f);
  Classifier patches(c);
  CHECK(ClassificationTask(patches, Device::cpu()).tokens(images) == 3 * 49);
  c.pool = PoolKind::Cls;
  c.max_len = 50;
  Classifier with_cls(c);
  CHECK(ClassificationTask(with_cls, Device::cpu()).tokens(images) == 3 * 49);
  Batch words;  // a text batch counts its words
  words.size = 2;
  words.src_lengths = {3, 5};
  CHECK(ClassificationTask(patches, Device::cpu()).tokens(words) == 8);
}
