// Classifier ensembles: ClassificationTask scores the mean of its models' probabilities (checked
// against the models' own probabilities, example by example), an ensemble of one model with
// itself is that model, `classify eval --checkpoint A B` prints the ensemble's metrics and
// refuses checkpoints that name other classes, and `classify predict --checkpoint A B` answers
// each line with the mean of the two models' class probabilities.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/model_configs.h"
#include "tests/temp_dir.h"
#include "train/loop/tasks.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// Token sequences of length 2-6 over the tiny classifier's vocabulary, three classes.
InMemoryDataset ensemble_examples() {
  std::vector<Example> examples;
  for (int i = 0; i < 37; ++i) {
    Example e;
    for (int t = 0; t < 2 + i % 5; ++t) e.src.push_back((i * 7 + t * 3) % 10);
    e.label = i % 3;
    examples.push_back(e);
  }
  return InMemoryDataset(std::move(examples));
}

// Each example's class probabilities under one model, in data order.
std::vector<std::vector<float>> probabilities_of(Classifier& model, const Dataset& data) {
  ClassificationTask task(model, Device::cpu());
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < data.size(); ++i) {
    Example e = data.get(i);
    Batch b;
    b.size = 1;
    b.src = e.src;
    b.src_len = static_cast<int64_t>(e.src.size());
    b.src_lengths = {static_cast<int32_t>(e.src.size())};
    b.labels = {e.label};
    out.push_back(task.probabilities(b).to_float_vector());
  }
  return out;
}

// `mixlab ARGS`, stdin from the file `input` when one is named.
Exit run_ensemble_app(TempDir& dir, const std::string& args, const std::string& input = "") {
  static int calls = 0;
  return run_app_shell(args, dir.file("ensemble-log-" + std::to_string(calls++) + ".txt"), "", "",
                       input);
}

// The value of "test <name> <value>" in an eval's output (NaN when absent).
double printed_metric(const std::string& output, const std::string& name) {
  const std::string key = "test " + name + " ";
  const size_t at = output.find(key);
  return at == std::string::npos ? NAN : std::stod(output.substr(at + key.size()));
}

// P(pos) for each answered line of a two-class `classify predict` run ("pos<TAB>p" or
// "neg<TAB>p", the chosen class and its probability), in input order.
std::vector<double> positive_probabilities(const std::string& output) {
  std::vector<double> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    const bool pos = line.rfind("pos\t", 0) == 0, neg = line.rfind("neg\t", 0) == 0;
    if (!pos && !neg) continue;
    const double p = std::stod(line.substr(4));
    out.push_back(pos ? p : 1 - p);
  }
  return out;
}

}  // namespace

TEST_CASE("classify ensemble: the mean of the models' probabilities, example by example") {
  ModelConfig ca = tiny_classifier("attention"), cb = tiny_classifier("gmlp");
  cb.seed = 11;
  Classifier a(ca), b(cb);
  a.eval();
  b.eval();
  InMemoryDataset data = ensemble_examples();
  const auto pa = probabilities_of(a, data), pb = probabilities_of(b, data);
  int correct = 0;
  double loss = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    std::vector<double> mean(3);
    for (int c = 0; c < 3; ++c) mean[c] = 0.5 * (pa[i][c] + pb[i][c]);
    const int label = data.get(i).label;
    correct += std::max_element(mean.begin(), mean.end()) - mean.begin() == label;
    loss -= std::log(mean[label]);
  }
  ClassificationTask task(a, Device::cpu());
  task.set_ensemble({&b});
  auto m = task.evaluate(data);
  CHECK(m["accuracy"] == doctest::Approx(static_cast<double>(correct) / data.size()));
  CHECK(m["loss"] == doctest::Approx(loss / data.size()).epsilon(1e-5));

  // One model with itself is that model.
  ClassificationTask alone(a, Device::cpu()), twice(a, Device::cpu());
  twice.set_ensemble({&a});
  auto ma = alone.evaluate(data), mt = twice.evaluate(data);
  CHECK(mt["accuracy"] == ma["accuracy"]);
  CHECK(mt["loss"] == doctest::Approx(ma["loss"]).epsilon(1e-5));
}

TEST_CASE(
    "classify ensemble app: eval and predict take several checkpoints, refuse other classes") {
  TempDir dir;
  {
    std::ofstream f(dir.file("data.tsv"));
    const char* pos[] = {"good great fine", "great good", "fine good nice", "nice great"};
    const char* neg[] = {"bad awful poor", "poor bad", "awful poor sad", "sad bad"};
    for (int i = 0; i < 20; ++i) f << "pos\t" << pos[i % 4] << "\nneg\t" << neg[i % 4] << "\n";
    std::ofstream g(dir.file("other.tsv"));
    for (int i = 0; i < 20; ++i) g << "x\t" << pos[i % 4] << "\ny\t" << neg[i % 4] << "\n";
  }
  const std::string train =
      "classify train --dim 16 --heads 2 --layers 1 --batch 8 --steps 6 "
      "--threads 1 --quiet --dropout 0 --data ";
  for (const char* seed : {"1", "2"}) {
    Exit t = run_ensemble_app(dir, train + dir.file("data.tsv") + " --seed " + seed + " --out " +
                                       dir.file(std::string("s") + seed));
    INFO(t.output);
    REQUIRE(t.code == 0);
  }
  Exit o = run_ensemble_app(dir, train + dir.file("other.tsv") + " --out " + dir.file("other"));
  REQUIRE(o.code == 0);
  const std::string a = dir.file("s1") + "/best.safetensors",
                    b = dir.file("s2") + "/best.safetensors";

  Exit single = run_ensemble_app(dir, "classify eval --checkpoint " + a);
  Exit self = run_ensemble_app(dir, "classify eval --checkpoint " + a + " " + a);
  Exit pair = run_ensemble_app(dir, "classify eval --checkpoint " + a + " " + b);
  INFO(single.output, self.output, pair.output);
  REQUIRE(single.code == 0);
  REQUIRE(self.code == 0);
  REQUIRE(pair.code == 0);
  CHECK(contains(pair.output, "ensemble: the mean of 2 models' probabilities"));
  CHECK_FALSE(contains(single.output, "ensemble"));
  CHECK(printed_metric(self.output, "accuracy") == printed_metric(single.output, "accuracy"));
  CHECK(printed_metric(self.output, "loss") ==
        doctest::Approx(printed_metric(single.output, "loss")).epsilon(1e-4));
  CHECK(std::isfinite(printed_metric(pair.output, "accuracy")));

  Exit mixed = run_ensemble_app(
      dir, "classify eval --checkpoint " + a + " " + dir.file("other") + "/best.safetensors");
  CHECK(mixed.code == 2);
  CHECK(contains(mixed.output, "names other classes than " + a));
  CHECK_FALSE(contains(mixed.output, "test accuracy"));

  // predict: each line's answer is the mean of the two models' probabilities (with two classes
  // the chosen class and its probability give the whole distribution).
  {
    std::ofstream lines(dir.file("lines.txt"));
    lines << "good great\nbad poor\nfine sad\nnice awful good\npoor\ngreat great great\n";
  }
  auto predict = [&](const std::string& checkpoints) {
    return run_ensemble_app(dir, "classify predict --checkpoint " + checkpoints,
                            dir.file("lines.txt"));
  };
  Exit pa = predict(a), pb = predict(b), pab = predict(a + " " + b);
  INFO(pa.output, pb.output, pab.output);
  REQUIRE(pab.code == 0);
  CHECK(contains(pab.output, "ensemble: the mean of 2 models' probabilities"));
  const std::vector<double> qa = positive_probabilities(pa.output),
                            qb = positive_probabilities(pb.output),
                            qab = positive_probabilities(pab.output);
  REQUIRE(qa.size() == 6);
  REQUIRE(qb.size() == 6);
  REQUIRE(qab.size() == 6);
  for (size_t i = 0; i < qab.size(); ++i)
    CHECK(qab[i] == doctest::Approx(0.5 * (qa[i] + qb[i])).epsilon(1e-4));
  Exit refused = predict(a + " " + dir.file("other") + "/best.safetensors");
  CHECK(refused.code == 2);
  CHECK(contains(refused.output, "names other classes than " + a));
  CHECK(positive_probabilities(refused.output).empty());
}
