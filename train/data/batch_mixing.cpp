#include "train/data/batch_mixing.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace mixlab {

namespace {

// One generator per (seed, epoch, batch), salted apart from the per-image augmentation's and the
// loader's streams.
SplitMix64 batch_generator(uint64_t seed, int64_t epoch, uint64_t first_index) {
  constexpr uint64_t kSalt = 0x6d69786261746368ULL;  // "mixbatch"
  uint64_t h = mix64(seed ^ kSalt);
  h = mix64(h ^ static_cast<uint64_t>(epoch));
  return SplitMix64(mix64(h ^ first_index));
}

// A standard normal draw (Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]).
double normal(SplitMix64& rng) {
  const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Gamma(α, 1) by Marsaglia and Tsang (2000); α < 1 through Gamma(α + 1) · U^(1/α).
double gamma(SplitMix64& rng, double alpha) {
  if (alpha < 1.0) return gamma(rng, alpha + 1.0) * std::pow(1.0 - rng.uniform(), 1.0 / alpha);
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - rng.uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

// x_b <- λ x_b + (1 - λ) x_{B-1-b} on every value.
void mixup(std::vector<float>& x, const std::vector<float>& source, size_t images, size_t pixels,
           double lambda) {
  const auto l = static_cast<float>(lambda);
  for (size_t b = 0; b < images; ++b) {
    const float* partner = source.data() + (images - 1 - b) * pixels;
    float* image = x.data() + b * pixels;
    for (size_t p = 0; p < pixels; ++p) image[p] = l * image[p] + (1.0f - l) * partner[p];
  }
}

// Pastes one box of x_{B-1-b} into every x_b: the box's sides are √(1 - λ) of the image's, its
// centre uniform over the image, clipped at the border. Returns the share of own pixels left.
double cutmix(std::vector<float>& x, const std::vector<float>& source, size_t images,
              const ImageAugmentation& a, double lambda, SplitMix64& rng) {
  const double side = std::sqrt(1.0 - lambda);
  const auto cut_h = static_cast<int64_t>(static_cast<double>(a.height) * side);
  const auto cut_w = static_cast<int64_t>(static_cast<double>(a.width) * side);
  const int64_t cy = rng.between(0, a.height - 1), cx = rng.between(0, a.width - 1);
  const int64_t top = std::clamp(cy - cut_h / 2, int64_t{0}, a.height);
  const int64_t bottom = std::clamp(cy + cut_h / 2, int64_t{0}, a.height);
  const int64_t left = std::clamp(cx - cut_w / 2, int64_t{0}, a.width);
  const int64_t right = std::clamp(cx + cut_w / 2, int64_t{0}, a.width);
  const size_t pixels = static_cast<size_t>(a.channels * a.height * a.width);
  for (size_t b = 0; b < images; ++b) {
    const float* partner = source.data() + (images - 1 - b) * pixels;
    float* image = x.data() + b * pixels;
    for (int64_t c = 0; c < a.channels; ++c)
      for (int64_t y = top; y < bottom; ++y)
        for (int64_t col = left; col < right; ++col) {
          const size_t at = static_cast<size_t>((c * a.height + y) * a.width + col);
          image[at] = partner[at];
        }
  }
  const double pasted = static_cast<double>((bottom - top) * (right - left));
  return 1.0 - pasted / static_cast<double>(a.height * a.width);
}

}  // namespace

double beta_symmetric(SplitMix64& rng, double alpha) {
  check(alpha > 0, "beta_symmetric: α must be positive, got ", alpha);
  const double x = gamma(rng, alpha), y = gamma(rng, alpha);
  return x + y > 0 ? x / (x + y) : 0.5;  // both underflow only for tiny α: call it a tie
}

void mix_batch(Batch& batch, const ImageAugmentation& a, uint64_t seed, int64_t epoch) {
  batch.mix_labels.clear();
  batch.mix_weight = 1.0;
  if (!a.mixes() || batch.indices.empty()) return;
  const size_t images = batch.indices.size();
  const size_t pixels = static_cast<size_t>(a.channels * a.height * a.width);
  check(batch.features.size() == pixels * images && batch.labels.size() == images,
        "mix_batch: ", batch.features.size(), " feature values and ", batch.labels.size(),
        " labels for ", images, " images of ", pixels);
  SplitMix64 rng = batch_generator(seed, epoch, batch.indices.front());
  const bool use_cutmix =
      a.cutmix > 0 && (a.mixup <= 0 || (rng.next() >> 63) != 0);  // both on: a fair coin
  const double lambda = beta_symmetric(rng, use_cutmix ? a.cutmix : a.mixup);
  const std::vector<float> source = batch.features;
  batch.mix_weight = use_cutmix ? cutmix(batch.features, source, images, a, lambda, rng) : lambda;
  if (!use_cutmix) mixup(batch.features, source, images, pixels, lambda);
  batch.mix_labels.assign(batch.labels.rbegin(), batch.labels.rend());
}

}  // namespace mixlab
