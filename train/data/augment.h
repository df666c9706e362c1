// Image augmentation for the training loader: random crop after padding, horizontal flip and
// random erasing, the recipe of the small ViT/MLP results on Fashion-MNIST (and torchvision's
// RandomCrop(padding=p), RandomHorizontalFlip, RandomErasing, in that order).
//
// Every draw is a pure function of (run seed, epoch, dataset index), never of the batch, the
// thread or the prefetch depth: an epoch's augmented images are the same however the run is
// split by resumes, and the same on every device. Off by default; evaluation never augments.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

struct ImageAugmentation {
  // Pad by this many background pixels on every side, then crop a window of the original size at
  // a uniformly drawn offset: a shift by (dy, dx) in [-crop_pad, crop_pad]². 0 = off.
  int64_t crop_pad = 0;
  bool flip = false;   // mirror left-right with probability 1/2
  double erase = 0.0;  // probability of erasing one rectangle (Zhong et al. 2020); 0 = off
  // Batch mixing (train/data/batch_mixing.h): the α of λ ~ Beta(α, α); 0 = off.
  double mixup = 0.0;
  double cutmix = 0.0;
  // The images' geometry, in (channel, row, column) order, and the value a padded pixel takes
  // (the standardized value of a black pixel).
  int64_t channels = 1, height = 0, width = 0;
  float background = 0.0f;

  bool mixes() const { return mixup > 0.0 || cutmix > 0.0; }
  bool enabled() const { return crop_pad > 0 || flip || erase > 0.0 || mixes(); }
  // "crop after padding 4, horizontal flip, random erasing p=0.25, mixup α=0.8", or "none".
  std::string describe() const;
};

// Refuses (Error naming the setting) a pad outside [0, 8], an erase probability outside [0, 1],
// a mixing α outside [0, 10], or a geometry that does not match `pixels` per image.
void check_augmentation(const ImageAugmentation& augment, int64_t pixels);

// Augments one image in place (size channels * height * width).
void augment_image(float* image, const ImageAugmentation& augment, uint64_t seed, int64_t epoch,
                   uint64_t index);

// Mirrors every image of a collated batch left-right: features [batch, channels * height * width],
// each image in (channel, row, column) order. The second view of test-time flip averaging.
void mirror_batch(std::vector<float>& features, int64_t channels, int64_t height, int64_t width);

// Augments every image of a collated batch: features [batch, pixels], `indices` the examples'
// dataset indices.
void augment_batch(std::vector<float>& features, const std::vector<size_t>& indices,
                   const ImageAugmentation& augment, uint64_t seed, int64_t epoch);

}  // namespace mixlab
