// Test-time flip averaging (`classify eval|predict --tta flip`, ClassificationTask::
// set_flip_averaging): the probabilities are the mean over every model of the ensemble and both
// views of each image, the image and its left-right mirror (checked against the models' own
// outputs on images mirrored here by hand); the training loss never uses it; a token classifier
// refuses it; and the app applies the flag, says so, and refuses it for a token checkpoint.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/model_configs.h"
#include "tests/temp_dir.h"
#include "tests/test_data_util.h"
#include "tests/test_helpers.h"
#include "train/data/augment.h"
#include "train/loop/tasks.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

constexpr int64_t kSide = 28;

ModelConfig tiny_image_classifier(uint64_t seed) {
  ModelConfig c = tiny_classifier("attention");
  c.input = InputKind::Image;
  c.max_len = 49;  // 4x4 patches of a 28x28 image
  c.seed = seed;
  return c;
}

// Each image's columns reversed, written out pixel by pixel.
std::vector<float> mirrored_by_hand(const std::vector<float>& images) {
  std::vector<float> out(images.size());
  const int64_t pixels = kSide * kSide;
  for (size_t start = 0; start < images.size(); start += pixels)
    for (int64_t y = 0; y < kSide; ++y)
      for (int64_t x = 0; x < kSide; ++x)
        out[start + y * kSide + x] = images[start + y * kSide + (kSide - 1 - x)];
  return out;
}

std::vector<float> softmax_of(Classifier& model, const std::vector<float>& images, int64_t n) {
  return softmax(model.forward(Tensor::from_data(images, {n, kSide * kSide})), -1)
      .to_float_vector();
}

Batch image_batch(int64_t n) {
  Batch b;
  b.size = n;
  b.features = rand32({n, kSide * kSide}, 3).to_float_vector();
  for (int64_t i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(i % 3));
  return b;
}

Exit run_tta_app(TempDir& dir, const std::string& args) {
  static int calls = 0;
  return run_app_shell(args, dir.file("tta-log-" + std::to_string(calls++) + ".txt"));
}

// The number after `name` on the line of the output that starts with it.
double metric(const std::string& output, const std::string& name) {
  const size_t at = output.find(name + " ");
  REQUIRE(at != std::string::npos);
  return std::stod(output.substr(at + name.size() + 1));
}

}  // namespace

TEST_CASE("flip averaging: the mean probability over the ensemble and both views of each image") {
  Classifier a(tiny_image_classifier(5)), b(tiny_image_classifier(6));
  a.eval();
  b.eval();
  const int64_t n = 5;
  const Batch batch = image_batch(n);
  std::vector<float> expected;
  {
    NoGradGuard no_grad;
    const std::vector<float> mirror = mirrored_by_hand(batch.features);
    std::vector<std::vector<float>> views{softmax_of(a, batch.features, n),
                                          softmax_of(b, batch.features, n),
                                          softmax_of(a, mirror, n), softmax_of(b, mirror, n)};
    expected.assign(views[0].size(), 0.0f);
    for (const auto& v : views)
      for (size_t i = 0; i < v.size(); ++i) expected[i] += v[i] / 4.0f;
  }
  ClassificationTask task(a, Device::cpu());
  task.set_ensemble({&b});
  a.train();
  const double training_loss = task.loss(batch).item();
  const std::vector<float> one_view = task.probabilities(batch).to_float_vector();
  task.set_flip_averaging(true);
  const std::vector<float> got = task.probabilities(batch).to_float_vector();
  REQUIRE(got.size() == expected.size());
  double moved = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-5));
    moved = std::max(moved, std::fabs(static_cast<double>(got[i]) - one_view[i]));
  }
  CHECK(moved > 1e-4);  // the mirrored view counts: these images are not symmetric
  // The training loss is the model's (and ensemble's) on the images as given.
  CHECK(task.loss(batch).item() == doctest::Approx(training_loss).epsilon(1e-9));
  CHECK(a.is_training());

  // evaluate() scores the same mean: its loss is the mean of -log p(label).
  std::vector<Example> examples;
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    e.features.assign(batch.features.begin() + i * kSide * kSide,
                      batch.features.begin() + (i + 1) * kSide * kSide);
    e.label = batch.labels[i];
    examples.push_back(e);
    loss -= std::log(expected[i * 3 + batch.labels[i]]) / n;
  }
  InMemoryDataset data(std::move(examples));
  CHECK(task.evaluate(data)["loss"] == doctest::Approx(loss).epsilon(1e-5));
}

TEST_CASE(
    "flip averaging: a symmetric image scores as without it, and mirror_batch reverses rows") {
  Classifier model(tiny_image_classifier(7));
  Batch batch = image_batch(2);
  const std::vector<float> mirror = mirrored_by_hand(batch.features);
  std::vector<float> twice = batch.features;
  mirror_batch(twice, 1, kSide, kSide);
  CHECK(twice == mirror);
  for (size_t i = 0; i < batch.features.size(); ++i)
    batch.features[i] = 0.5f * (batch.features[i] + mirror[i]);  // left-right symmetric
  ClassificationTask task(model, Device::cpu());
  const std::vector<float> plain = task.probabilities(batch).to_float_vector();
  task.set_flip_averaging(true);
  const std::vector<float> averaged = task.probabilities(batch).to_float_vector();
  for (size_t i = 0; i < plain.size(); ++i)
    CHECK(averaged[i] == doctest::Approx(plain[i]).epsilon(1e-5));
}

TEST_CASE("flip averaging: a token classifier refuses it") {
  Classifier model(tiny_classifier("attention"));
  ClassificationTask task(model, Device::cpu());
  task.set_flip_averaging(false);
  CHECK_THROWS_WITH_AS(task.set_flip_averaging(true), doctest::Contains("image classifier"), Error);
}

TEST_CASE("flip averaging app: --tta flip is applied and said, and refused for tokens") {
  TempDir dir;
  write_idx_image_folder(dir.root / "images", 40);
  Exit t = run_tta_app(dir,
                       "classify train --dim 16 --heads 2 --layers 1 --patch 7 --batch 8 "
                       "--threads 1 --quiet --dropout 0 --epochs 1 --data " +
                           dir.file("images") + " --out " + dir.file("run"));
  INFO(t.output);
  REQUIRE(t.code == 0);
  const std::string ckpt = " --checkpoint " + dir.file("run") + "/best.safetensors";

  Exit plain = run_tta_app(dir, "classify eval" + ckpt);
  Exit flip = run_tta_app(dir, "classify eval --tta flip" + ckpt);
  Exit none = run_tta_app(dir, "classify eval --tta none" + ckpt);
  INFO(flip.output);
  REQUIRE(plain.code == 0);
  REQUIRE(flip.code == 0);
  REQUIRE(none.code == 0);
  CHECK(flip.output.find("test-time augmentation") != std::string::npos);
  CHECK(plain.output.find("test-time augmentation") == std::string::npos);
  CHECK(metric(none.output, "test loss") == metric(plain.output, "test loss"));
  CHECK(metric(flip.output, "test loss") != metric(plain.output, "test loss"));

  // predict: the same flag moves each image's probability.
  const std::string images = " --images " + dir.file("images") + "/t10k-images-idx3-ubyte";
  Exit predicted = run_tta_app(dir, "classify predict" + ckpt + images);
  Exit predicted_flip = run_tta_app(dir, "classify predict --tta flip" + ckpt + images);
  REQUIRE(predicted.code == 0);
  REQUIRE(predicted_flip.code == 0);
  CHECK(predicted.output != predicted_flip.output);

  Exit unknown = run_tta_app(dir, "classify eval --tta rotate" + ckpt);
  CHECK(unknown.code == 2);

  {
    std::ofstream f(dir.file("text.tsv"));
    for (int i = 0; i < 20; ++i) f << "pos\tgood great\nneg\tbad awful\n";
  }
  Exit text = run_tta_app(dir,
                          "classify train --dim 16 --heads 2 --layers 1 --batch 8 --steps 2 "
                          "--threads 1 --quiet --data " +
                              dir.file("text.tsv") + " --out " + dir.file("text"));
  REQUIRE(text.code == 0);
  Exit refused = run_tta_app(
      dir, "classify eval --tta flip --checkpoint " + dir.file("text") + "/best.safetensors");
  INFO(refused.output);
  CHECK(refused.code == 2);
  CHECK(refused.output.find("--tta flip") != std::string::npos);
  CHECK(refused.output.find("classifies tokens") != std::string::npos);
}
