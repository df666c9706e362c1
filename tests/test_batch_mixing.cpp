// Batch mixing (train/data/batch_mixing.h): off by default; the Beta draws' moments; mixup and
// CutMix on known images; the same batches with prefetch, across a resume and on a rerun; the
// loss against both labels. The classify app's flags: tests/test_augment.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/model_configs.h"
#include "tests/test_data_util.h"
#include "train/data/batch_mixing.h"
#include "train/data/data_loader.h"
#include "train/loop/tasks.h"

using namespace mixlab;

namespace {

ImageAugmentation mixing_geometry(int64_t side) {
  ImageAugmentation a;
  a.height = a.width = side;
  return a;
}

// `count` side x side images, image e filled with the value e + 1 and labelled e % 10.
Batch constant_images_batch(size_t count, int64_t side) {
  Batch b;
  b.size = static_cast<int64_t>(count);
  for (size_t e = 0; e < count; ++e) {
    b.features.insert(b.features.end(), static_cast<size_t>(side * side),
                      static_cast<float>(e + 1));
    b.labels.push_back(static_cast<int32_t>(e % 10));
    b.indices.push_back(100 + e);
  }
  return b;
}

// One epoch's batches as (features, partner labels, weight).
struct MixedBatch {
  std::vector<float> features;
  std::vector<int32_t> mix_labels;
  double mix_weight;
  bool operator==(const MixedBatch&) const = default;
};

std::vector<MixedBatch> mixed_epoch(const Dataset& data, const DataLoaderOptions& o, int64_t epoch,
                                    int64_t skip = 0) {
  DataLoader loader(data, o);
  loader.start_epoch(epoch, skip);
  std::vector<MixedBatch> out;
  for (Batch b; loader.next(b);) out.push_back({b.features, b.mix_labels, b.mix_weight});
  return out;
}

}  // namespace

TEST_CASE("batch mixing: off by default, and per-image augmentation alone does not mix") {
  ImageAugmentation a;
  CHECK_FALSE(a.mixes());
  a = mixing_geometry(4);
  a.flip = true;
  Batch b = constant_images_batch(6, 4);
  const std::vector<float> before = b.features;
  mix_batch(b, a, 1, 0);
  CHECK(b.features == before);
  CHECK(b.mix_labels.empty());
  CHECK(b.mix_weight == 1.0);
  // A batch reused by the loader forgets an earlier batch's mixing.
  b.mix_labels = {1, 2};
  b.mix_weight = 0.3;
  mix_batch(b, a, 1, 0);
  CHECK(b.mix_labels.empty());
  CHECK(b.mix_weight == 1.0);
}

TEST_CASE("batch mixing: Beta(α, α) draws have the distribution's mean and variance") {
  for (double alpha : {0.3, 0.8, 1.0, 4.0}) {
    INFO("alpha ", alpha);
    SplitMix64 rng(42);
    const int n = 40000;
    double sum = 0, sum_sq = 0;
    bool inside = true;
    for (int i = 0; i < n; ++i) {
      const double x = beta_symmetric(rng, alpha);
      inside = inside && x >= 0 && x <= 1;
      sum += x, sum_sq += x * x;
    }
    const double mean = sum / n, variance = sum_sq / n - mean * mean;
    CHECK(inside);
    CHECK(mean == doctest::Approx(0.5).epsilon(0.02));
    // Var = 1 / (4 (2α + 1)).
    CHECK(variance == doctest::Approx(1.0 / (4.0 * (2.0 * alpha + 1.0))).epsilon(0.04));
  }
  SplitMix64 rng(1);
  CHECK_THROWS(beta_symmetric(rng, 0.0));
}

TEST_CASE("batch mixing: mixup blends each image with its partner in reverse order") {
  ImageAugmentation a = mixing_geometry(3);
  a.mixup = 0.8;
  Batch b = constant_images_batch(5, 3);
  mix_batch(b, a, 7, 2);
  const double lambda = b.mix_weight;
  CHECK(lambda > 0);
  CHECK(lambda < 1);
  CHECK(b.mix_labels == std::vector<int32_t>{4, 3, 2, 1, 0});
  for (size_t e = 0; e < 5; ++e) {
    const double want = lambda * static_cast<double>(e + 1) +
                        (1 - lambda) * static_cast<double>(5 - e);  // partner 4 - e holds 5 - e
    for (size_t p = 0; p < 9; ++p) CHECK(b.features[e * 9 + p] == doctest::Approx(want));
  }
}

TEST_CASE("batch mixing: CutMix pastes one box of the partner, λ its own pixels' share") {
  ImageAugmentation a = mixing_geometry(8);
  a.cutmix = 1.0;
  int boxes = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    INFO("seed ", seed);
    Batch b = constant_images_batch(4, 8);
    mix_batch(b, a, seed, 0);
    CHECK(b.mix_labels == std::vector<int32_t>{3, 2, 1, 0});
    std::vector<int> pasted_at;  // image 0's pasted pixels
    for (size_t e = 0; e < 4; ++e) {
      const auto own = static_cast<float>(e + 1), partner = static_cast<float>(4 - e);
      int own_count = 0;
      for (int p = 0; p < 64; ++p) {
        const float v = b.features[e * 64 + static_cast<size_t>(p)];
        CHECK((v == own || v == partner));
        own_count += v == own;
        if (e == 0 && v == partner) pasted_at.push_back(p);
      }
      CHECK(b.mix_weight == doctest::Approx(own_count / 64.0));
    }
    if (pasted_at.empty()) continue;
    ++boxes;
    // The pasted pixels fill the rectangle that bounds them.
    int top = 8, bottom = -1, left = 8, right = -1;
    for (int p : pasted_at) {
      top = std::min(top, p / 8), bottom = std::max(bottom, p / 8);
      left = std::min(left, p % 8), right = std::max(right, p % 8);
    }
    CHECK(static_cast<int>(pasted_at.size()) == (bottom - top + 1) * (right - left + 1));
  }
  CHECK(boxes >= 10);
}

TEST_CASE("batch mixing: with both on, batches draw mixup or CutMix about equally") {
  ImageAugmentation a = mixing_geometry(6);
  a.mixup = 0.8;
  a.cutmix = 1.0;
  int cut = 0, blended = 0;
  for (uint64_t first = 0; first < 200; ++first) {
    Batch b = constant_images_batch(4, 6);
    b.indices[0] = first;
    mix_batch(b, a, 3, 0);
    bool only_own_or_partner = true;  // CutMix's images hold only the two values
    for (size_t e = 0; e < 4; ++e)
      for (size_t p = 0; p < 36; ++p) {
        const float v = b.features[e * 36 + p];
        only_own_or_partner = only_own_or_partner &&
                              (v == static_cast<float>(e + 1) || v == static_cast<float>(4 - e));
      }
    (only_own_or_partner ? cut : blended) += 1;
  }
  CHECK(cut > 70);  // binomial(200, 1/2): 100 ± 7.1 (a mixup λ of exactly 0 or 1 is negligible)
  CHECK(blended > 70);
}

TEST_CASE("batch mixing: the loader's batches are the same with prefetch, resumed and rerun") {
  ImageAugmentation a = mixing_geometry(5);
  a.channels = 1;
  a.mixup = 0.5;
  a.cutmix = 1.0;
  a.flip = true;
  InMemoryDataset data = testing::numbered_image_dataset(23, 5);
  DataLoaderOptions o;
  o.batch_size = 4;
  o.seed = 9;
  o.augment = a;
  const auto plain = mixed_epoch(data, o, 1);
  REQUIRE(plain.size() == 6);
  for (const auto& b : plain) CHECK(b.mix_labels.size() * 25 == b.features.size());
  CHECK(mixed_epoch(data, o, 1) == plain);
  o.prefetch = 2;
  CHECK(mixed_epoch(data, o, 1) == plain);
  const auto resumed = mixed_epoch(data, o, 1, 2);
  REQUIRE(resumed.size() == plain.size() - 2);
  CHECK(std::equal(resumed.begin(), resumed.end(), plain.begin() + 2));
  CHECK(mixed_epoch(data, o, 2) != plain);
  // Evaluation's loader has no augmentation, so it never mixes.
  o.augment = ImageAugmentation{};
  for (const auto& b : mixed_epoch(data, o, 1)) CHECK(b.mix_labels.empty());
}

TEST_CASE("batch mixing: a mixed batch's loss is λ CE(y) + (1 - λ) CE(y_partner)") {
  ModelConfig c = testing::tiny_classifier("attention");
  Classifier model(c);
  model.eval();
  ClassificationTask task(model, Device::cpu(), 0.1);
  Batch b;
  b.size = 3;
  b.src = {1, 2, 3, 4, 5, 6};
  b.src_len = 2;
  b.src_lengths = {2, 2, 2};
  b.labels = {0, 1, 2};
  const double own = task.loss(b).item();
  Batch partner = b;
  partner.labels = {2, 1, 0};
  const double other = task.loss(partner).item();
  b.mix_labels = {2, 1, 0};
  b.mix_weight = 0.3;
  CHECK(task.loss(b).item() == doctest::Approx(0.3 * own + 0.7 * other).epsilon(1e-6));
}
