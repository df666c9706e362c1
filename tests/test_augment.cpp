// Image augmentation (train/data/augment.h): off by default, a pure function of (seed, epoch,
// index), each transform's effect on a known image, the loader's batches the same with and
// without prefetch and across a resume, and the classify app's flags applied and recorded (the
// augmentation flags and --stem, the image tokenizer).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/app_runner.h"
#include "tests/file_helpers.h"
#include "tests/temp_dir.h"
#include "tests/test_data_util.h"
#include "train/data/augment.h"
#include "train/data/data_loader.h"

using namespace mixlab;
namespace fs = std::filesystem;

namespace {

constexpr float kAugmentBackground = -1.0f;

ImageAugmentation augment_geometry(int64_t side) {
  ImageAugmentation a;
  a.height = a.width = side;
  a.background = kAugmentBackground;
  return a;
}

// A side x side image, background everywhere but one pixel of value 5 at (y, x).
std::vector<float> marked_pixel_image(int64_t side, int64_t y, int64_t x) {
  std::vector<float> image(static_cast<size_t>(side * side), kAugmentBackground);
  image[static_cast<size_t>(y * side + x)] = 5.0f;
  return image;
}

// Where the value 5 is, as (y, x); (-1, -1) when it is gone.
std::pair<int64_t, int64_t> find_marked_pixel(const std::vector<float>& image, int64_t side) {
  for (int64_t i = 0; i < side * side; ++i)
    if (image[static_cast<size_t>(i)] == 5.0f) return {i / side, i % side};
  return {-1, -1};
}

std::vector<std::vector<float>> augmented_epoch(const Dataset& data, DataLoaderOptions o,
                                                int64_t epoch, int64_t skip = 0) {
  DataLoader loader(data, o);
  loader.start_epoch(epoch, skip);
  std::vector<std::vector<float>> out;
  for (Batch b; loader.next(b);) out.push_back(b.features);
  return out;
}

}  // namespace

TEST_CASE("augment: off by default, and the loader then hands out the images unchanged") {
  ImageAugmentation none;
  CHECK_FALSE(none.enabled());
  CHECK(none.describe() == "none");
  InMemoryDataset data = testing::numbered_image_dataset(10, 6);
  DataLoaderOptions o;
  o.batch_size = 4;
  o.seed = 3;
  for (const auto& features : augmented_epoch(data, o, 0)) {
    // Every value is an untouched pixel: e * 1000 + p with p < 36.
    for (float v : features) CHECK(std::fmod(v, 1000.0f) < 36.0f);
  }
  DataLoader loader(data, o);
  loader.start_epoch(0);
  Batch b;
  REQUIRE(loader.next(b));
  for (size_t i = 0; i < b.indices.size(); ++i)
    CHECK(std::equal(b.features.begin() + static_cast<std::ptrdiff_t>(i * 36),
                     b.features.begin() + static_cast<std::ptrdiff_t>((i + 1) * 36),
                     data.at(b.indices[i]).features.begin()));
}

TEST_CASE("augment: the crop after padding moves a known pixel by at most the padding") {
  ImageAugmentation a = augment_geometry(9);
  a.crop_pad = 2;
  std::vector<int> seen_dy(5, 0);
  for (uint64_t index = 0; index < 200; ++index) {
    std::vector<float> image = marked_pixel_image(9, 4, 4);
    augment_image(image.data(), a, 7, 0, index);
    auto [y, x] = find_marked_pixel(image, 9);
    REQUIRE(y >= 0);  // a centre pixel never leaves a 9x9 image under shifts of 2
    CHECK(std::abs(y - 4) <= 2);
    CHECK(std::abs(x - 4) <= 2);
    ++seen_dy[static_cast<size_t>(y - 4 + 2)];
    // Everything else is background: the image was shifted, not changed.
    CHECK(std::count(image.begin(), image.end(), kAugmentBackground) == 80);
  }
  for (int n : seen_dy) CHECK(n > 10);  // every offset of [-2, 2] is drawn, about 40 times each
  // Shifted in from outside: background fills the edge.
  ImageAugmentation big = augment_geometry(3);
  big.crop_pad = 8;
  int emptied = 0;
  for (uint64_t index = 0; index < 50; ++index) {
    std::vector<float> image = marked_pixel_image(3, 1, 1);
    augment_image(image.data(), big, 1, 0, index);
    if (find_marked_pixel(image, 3).first < 0) ++emptied;
  }
  CHECK(emptied > 0);
}

TEST_CASE("augment: the flip mirrors left and right, about half of the time") {
  ImageAugmentation a = augment_geometry(5);
  a.flip = true;
  int flipped = 0;
  for (uint64_t index = 0; index < 400; ++index) {
    std::vector<float> image = marked_pixel_image(5, 1, 0);
    augment_image(image.data(), a, 11, 2, index);
    auto [y, x] = find_marked_pixel(image, 5);
    CHECK(y == 1);
    CHECK((x == 0 || x == 4));
    flipped += x == 4;
  }
  CHECK(flipped > 160);  // binomial(400, 1/2): 200 ± 10, so far inside ±40
  CHECK(flipped < 240);
}

TEST_CASE("augment: random erasing zeroes one rectangle of 2% to 33% of the image") {
  ImageAugmentation a = augment_geometry(20);
  a.erase = 1.0;
  for (uint64_t index = 0; index < 50; ++index) {
    std::vector<float> image(400, 3.0f);
    augment_image(image.data(), a, 5, 0, index);
    int64_t top = 20, bottom = -1, left = 20, right = -1, zeros = 0;
    for (int64_t i = 0; i < 400; ++i) {
      if (image[static_cast<size_t>(i)] != 0.0f) continue;
      ++zeros;
      top = std::min(top, i / 20), bottom = std::max(bottom, i / 20);
      left = std::min(left, i % 20), right = std::max(right, i % 20);
    }
    REQUIRE(zeros > 0);
    CHECK(zeros == (bottom - top + 1) * (right - left + 1));  // one filled rectangle
    CHECK(zeros >= 0.02 * 400 * 0.5);                         // rounding of the sides
    CHECK(zeros <= 400 / 3.0 * 1.5);
  }
  a.erase = 0.25;
  int erased = 0;
  for (uint64_t index = 0; index < 400; ++index) {
    std::vector<float> image(400, 3.0f);
    augment_image(image.data(), a, 5, 0, index);
    erased += std::count(image.begin(), image.end(), 0.0f) > 0;
  }
  CHECK(erased > 60);  // binomial(400, 1/4): 100 ± 8.7
  CHECK(erased < 140);
}

TEST_CASE("augment: a pure function of seed, epoch and index, other epochs draw anew") {
  ImageAugmentation a = augment_geometry(6);
  a.crop_pad = 3;
  a.flip = true;
  a.erase = 0.5;
  InMemoryDataset data = testing::numbered_image_dataset(12, 6);
  std::vector<float> first = data.at(4).features, again = first, other_epoch = first;
  augment_image(first.data(), a, 9, 1, 4);
  augment_image(again.data(), a, 9, 1, 4);
  CHECK(first == again);
  int differs = 0;
  for (uint64_t index = 0; index < 12; ++index) {
    std::vector<float> e1 = data.at(index).features, e2 = e1;
    augment_image(e1.data(), a, 9, 1, index);
    augment_image(e2.data(), a, 9, 2, index);
    differs += e1 != e2;
  }
  CHECK(differs >= 6);

  DataLoaderOptions o;
  o.batch_size = 5;
  o.seed = 9;
  o.augment = a;
  o.augment.channels = 1;
  const auto plain = augmented_epoch(data, o, 1);
  o.prefetch = 2;
  CHECK(augmented_epoch(data, o, 1) == plain);  // the prefetch thread draws the same
  const auto resumed = augmented_epoch(data, o, 1, 1);
  REQUIRE(resumed.size() == plain.size() - 1);
  CHECK(std::equal(resumed.begin(), resumed.end(), plain.begin() + 1));  // a resume too
  CHECK(augmented_epoch(data, o, 2) != plain);
}

TEST_CASE("augment: settings out of range and a geometry that does not fit are refused") {
  ImageAugmentation a = augment_geometry(5);
  a.crop_pad = 9;
  CHECK_THROWS_WITH(check_augmentation(a, 25), doctest::Contains("--augment-crop"));
  a.crop_pad = 1;
  a.erase = 1.5;
  CHECK_THROWS_WITH(check_augmentation(a, 25), doctest::Contains("--augment-erase"));
  a.erase = 0;
  a.mixup = -0.5;
  CHECK_THROWS_WITH(check_augmentation(a, 25), doctest::Contains("--augment-mixup"));
  a.mixup = 0;
  a.cutmix = 10.5;
  CHECK_THROWS_WITH(check_augmentation(a, 25), doctest::Contains("--augment-cutmix"));
  a.cutmix = 0;
  CHECK_THROWS_WITH(check_augmentation(a, 24), doctest::Contains("1x5x5"));
  CHECK_NOTHROW(check_augmentation(a, 25));
}

namespace {

// `mixlab ARGS` (split at spaces), its log in `dir`.
testing::Exit run_augment_app(const testing::TempDir& dir, const std::string& args) {
  static int calls = 0;
  return testing::run_app_shell(args, dir.file("log-" + std::to_string(calls++) + ".txt"));
}

}  // namespace

TEST_CASE("augment app: the flags, mixing too, change training, are recorded, token data refuses") {
  testing::TempDir dir;
  testing::write_idx_image_folder(dir.root / "images", 40);
  const std::string base = "classify train --data " + dir.file("images") +
                           " --dim 16 --heads 2 --layers 1 --patch 7 --batch 8 --steps 4 "
                           "--threads 1 --quiet --dropout 0 ";
  testing::Exit plain = run_augment_app(dir, base + "--out " + dir.file("plain"));
  INFO(plain.output);
  REQUIRE(plain.code == 0);
  testing::Exit augmented = run_augment_app(
      dir, base + "--augment-crop 2 --augment-flip --augment-erase 0.5 --out " + dir.file("aug"));
  INFO(augmented.output);
  REQUIRE(augmented.code == 0);
  // The data line and the checkpoint's data description name the augmentation.
  CHECK(testing::contains(augmented.output,
                          "training images augmented: crop after padding 2, horizontal flip, "
                          "random erasing p=0.5"));
  const std::string checkpoint = testing::read_file(dir.file("aug") + "/last.safetensors");
  CHECK(testing::contains(checkpoint, "crop after padding 2"));
  CHECK_FALSE(
      testing::contains(testing::read_file(dir.file("plain") + "/last.safetensors"), "augment"));
  // Applied: the same seed trains other weights when the images are augmented.
  CHECK(testing::read_file(dir.file("aug") + "/best.safetensors") !=
        testing::read_file(dir.file("plain") + "/best.safetensors"));
  // Deterministic: the same command gives the same checkpoint bytes.
  testing::Exit again = run_augment_app(
      dir, base + "--augment-crop 2 --augment-flip --augment-erase 0.5 --out " + dir.file("aug2"));
  REQUIRE(again.code == 0);
  CHECK(testing::read_file(dir.file("aug2") + "/last.safetensors") == checkpoint);

  // Batch mixing: applied, recorded, the same on a rerun; an α out of range is refused.
  const std::string mix = "--augment-mixup 0.8 --augment-cutmix 1 --out ";
  testing::Exit mixed = run_augment_app(dir, base + mix + dir.file("mixed"));
  INFO(mixed.output);
  REQUIRE(mixed.code == 0);
  CHECK(testing::contains(mixed.output, "training images augmented: mixup α=0.8, CutMix α=1"));
  const std::string mixed_checkpoint = testing::read_file(dir.file("mixed") + "/last.safetensors");
  CHECK(testing::contains(mixed_checkpoint, "mixup α=0.8, CutMix α=1"));
  CHECK(mixed_checkpoint != testing::read_file(dir.file("plain") + "/last.safetensors"));
  REQUIRE(run_augment_app(dir, base + mix + dir.file("mixed2")).code == 0);
  CHECK(testing::read_file(dir.file("mixed2") + "/last.safetensors") == mixed_checkpoint);
  testing::Exit bad = run_augment_app(dir, base + "--augment-cutmix 11 --out " + dir.file("bad"));
  CHECK(bad.code == 2);
  CHECK(testing::contains(bad.output, "--augment-cutmix"));
  CHECK_FALSE(fs::exists(dir.file("bad")));

  std::ofstream(dir.file("text.tsv")) << "a\tx y\nb\ty z\na\tx x\nb\tz z\na\tx\nb\tz\n"
                                      << "a\tx y x\nb\tz y z\na\ty x\nb\ty z\nb\tz\n";
  testing::Exit tokens =
      run_augment_app(dir, "classify train --data " + dir.file("text.tsv") +
                               " --augment-flip --steps 1 --out " + dir.file("tok"));
  CHECK(tokens.code == 2);
  CHECK(testing::contains(tokens.output, "--augment-flip"));
  CHECK_FALSE(fs::exists(dir.file("tok")));
}

TEST_CASE(
    "image stem app: --stem conv is trained, saved and evaluated, and an odd patch is refused") {
  testing::TempDir dir;
  testing::write_idx_image_folder(dir.root / "images", 40);
  const std::string base = "classify train --data " + dir.file("images") +
                           " --dim 16 --heads 2 --layers 1 --batch 8 --steps 4 --threads 1 "
                           "--quiet --dropout 0 ";
  testing::Exit conv = run_augment_app(dir, base + "--stem conv --patch 4 --out " + dir.file("c"));
  INFO(conv.output);
  REQUIRE(conv.code == 0);
  CHECK(testing::contains(testing::read_file(dir.file("c") + "/model.json"), "\"stem\":\"conv\""));
  CHECK(testing::contains(testing::read_file(dir.file("c") + "/config.ini"), "stem=\"conv\""));
  // The checkpoint rebuilds the tokenizer: eval scores the test images as training did.
  testing::Exit eval =
      run_augment_app(dir, "classify eval --threads 1 --checkpoint " + dir.file("c") +
                               "/best.safetensors --data " + dir.file("images"));
  INFO(eval.output);
  REQUIRE(eval.code == 0);
  const std::string metrics = testing::read_file(dir.file("c") + "/metrics.csv");
  const std::string test_row = metrics.substr(metrics.rfind("test,"));
  const std::string accuracy = test_row.substr(0, test_row.find(",,"));
  CHECK(
      testing::contains(eval.output, "test accuracy " + accuracy.substr(accuracy.rfind(',') + 1)));
  // A patch that 2x2 pooling cannot reach is a usage error before anything is written.
  testing::Exit odd = run_augment_app(dir, base + "--stem conv --patch 7 --out " + dir.file("odd"));
  CHECK(odd.code == 2);
  CHECK(testing::contains(odd.output, "--stem conv needs a --patch that is a power of two"));
  CHECK_FALSE(fs::exists(dir.file("odd")));
}
