#include "train/data/augment.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "train/data/rng.h"

namespace mixlab {

namespace {

// Random erasing's ranges, as in the paper and torchvision: the erased area is 2%–33% of the
// image, its aspect ratio log-uniform in [0.3, 1/0.3]; a draw that does not fit is retried.
constexpr double kEraseMinArea = 0.02, kEraseMaxArea = 1.0 / 3.0, kEraseMinAspect = 0.3;
constexpr int kEraseAttempts = 10;

// One generator per (seed, epoch, example): mixed through mix64 so that neighbouring values give
// unrelated streams, with a salt that keeps them apart from the loader's shuffling streams.
SplitMix64 example_generator(uint64_t seed, int64_t epoch, uint64_t index) {
  constexpr uint64_t kSalt = 0x61756736d656e74ULL;  // "augment"
  uint64_t h = mix64(seed ^ kSalt);
  h = mix64(h ^ static_cast<uint64_t>(epoch));
  return SplitMix64(mix64(h ^ index));
}

// out[c, y, x] = in[c, y + dy, x + dx], background outside: the crop of the padded image whose
// corner is (pad + dy, pad + dx).
void shift(float* image, const ImageAugmentation& a, int64_t dy, int64_t dx) {
  const int64_t h = a.height, w = a.width;
  std::vector<float> source(image, image + a.channels * h * w);
  for (int64_t c = 0; c < a.channels; ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sy = y + dy, sx = x + dx;
        const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
        image[(c * h + y) * w + x] = inside ? source[(c * h + sy) * w + sx] : a.background;
      }
}

// out[c, y, x] = in[c, y, w - 1 - x].
void mirror(float* image, const ImageAugmentation& a) {
  for (int64_t c = 0; c < a.channels; ++c)
    for (int64_t y = 0; y < a.height; ++y) {
      float* row = image + (c * a.height + y) * a.width;
      std::reverse(row, row + a.width);
    }
}

// Sets one rectangle of area s·H·W and aspect r (s, log r uniform) to 0, the standardized mean,
// as torchvision's RandomErasing(value=0) does after normalisation.
void erase(float* image, const ImageAugmentation& a, SplitMix64& rng) {
  const double area = static_cast<double>(a.height * a.width);
  for (int attempt = 0; attempt < kEraseAttempts; ++attempt) {
    const double target = area * (kEraseMinArea + (kEraseMaxArea - kEraseMinArea) * rng.uniform());
    const double log_r = std::log(kEraseMinAspect) * (1.0 - 2.0 * rng.uniform());
    const double aspect = std::exp(log_r);
    const auto eh = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
    const auto ew = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
    if (eh < 1 || ew < 1 || eh > a.height || ew > a.width) continue;
    const int64_t top = rng.between(0, a.height - eh), left = rng.between(0, a.width - ew);
    for (int64_t c = 0; c < a.channels; ++c)
      for (int64_t y = top; y < top + eh; ++y)
        std::fill_n(image + (c * a.height + y) * a.width + left, ew, 0.0f);
    return;
  }
}

}  // namespace

std::string ImageAugmentation::describe() const {
  if (!enabled()) return "none";
  std::ostringstream out;
  const char* sep = "";
  if (crop_pad > 0) out << sep << "crop after padding " << crop_pad, sep = ", ";
  if (flip) out << sep << "horizontal flip", sep = ", ";
  if (erase > 0) out << sep << "random erasing p=" << erase, sep = ", ";
  if (mixup > 0) out << sep << "mixup α=" << mixup, sep = ", ";
  if (cutmix > 0) out << sep << "CutMix α=" << cutmix;
  return out.str();
}

void check_augmentation(const ImageAugmentation& a, int64_t pixels) {
  check(a.crop_pad >= 0 && a.crop_pad <= 8,
        "--augment-crop: the padding must be 0 to 8 pixels, got ", a.crop_pad);
  check(a.erase >= 0.0 && a.erase <= 1.0,
        "--augment-erase: the probability must be in [0, 1], got ", a.erase);
  check(a.mixup >= 0.0 && a.mixup <= 10.0, "--augment-mixup: α must be in [0, 10], got ", a.mixup);
  check(a.cutmix >= 0.0 && a.cutmix <= 10.0, "--augment-cutmix: α must be in [0, 10], got ",
        a.cutmix);
  if (!a.enabled()) return;
  check(
      a.channels >= 1 && a.height >= 1 && a.width >= 1 && a.channels * a.height * a.width == pixels,
      "image augmentation: images of ", pixels, " values are not ", a.channels, "x", a.height, "x",
      a.width);
}

void augment_image(float* image, const ImageAugmentation& a, uint64_t seed, int64_t epoch,
                   uint64_t index) {
  if (!a.enabled()) return;
  SplitMix64 rng = example_generator(seed, epoch, index);
  // A fixed order, crop, flip, erase, each drawing only when it is on.
  if (a.crop_pad > 0) {
    const int64_t dy = rng.between(-a.crop_pad, a.crop_pad);
    const int64_t dx = rng.between(-a.crop_pad, a.crop_pad);
    shift(image, a, dy, dx);
  }
  if (a.flip && (rng.next() >> 63) != 0) mirror(image, a);
  if (a.erase > 0 && rng.uniform() < a.erase) erase(image, a, rng);
}

void mirror_batch(std::vector<float>& features, int64_t channels, int64_t height, int64_t width) {
  ImageAugmentation geometry;
  geometry.channels = channels;
  geometry.height = height;
  geometry.width = width;
  const size_t pixels = static_cast<size_t>(channels * height * width);
  check(pixels > 0 && features.size() % pixels == 0, "mirror_batch: ", features.size(),
        " feature values are no whole number of ", channels, "x", height, "x", width, " images");
  for (size_t start = 0; start < features.size(); start += pixels)
    mirror(features.data() + start, geometry);
}

void augment_batch(std::vector<float>& features, const std::vector<size_t>& indices,
                   const ImageAugmentation& a, uint64_t seed, int64_t epoch) {
  if (!a.enabled() || indices.empty()) return;
  const size_t pixels = static_cast<size_t>(a.channels * a.height * a.width);
  check(features.size() == pixels * indices.size(), "augment_batch: ", features.size(),
        " feature values for ", indices.size(), " images of ", pixels);
  for (size_t b = 0; b < indices.size(); ++b)
    augment_image(features.data() + b * pixels, a, seed, epoch, indices[b]);
}

}  // namespace mixlab
