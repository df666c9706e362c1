// Batch mixing for image classification: mixup (Zhang et al. 2018) and CutMix (Yun et al. 2019),
// the regularisers of DeiT's recipe for transformers trained on little data.
//
// Each batch is mixed with itself in reverse order (timm's batch mode): image b with image
// B - 1 - b, under one weight λ ~ Beta(α, α) for the whole batch.
//   mixup:  x_b <- λ x_b + (1 - λ) x_{B-1-b}
//   CutMix: x_b <- x_b with one box of area (1 - λ) H W taken from x_{B-1-b}; λ is then the
//           share of x_b's own pixels left after clipping the box to the image.
// The loss is λ CE(z_b, y_b) + (1 - λ) CE(z_b, y_{B-1-b}) (ClassificationTask::loss). With both
// on, each batch draws one of the two with probability 1/2.
//
// Every draw is a pure function of (run seed, epoch, the batch's first dataset index), so a
// resumed run mixes its batches as the uninterrupted one did. A distributed run mixes each
// process's share of the global batch by itself. Off by default; evaluation never mixes.
#pragma once
#include <cstdint>
#include <vector>

#include "train/data/augment.h"
#include "train/data/dataset.h"
#include "train/data/rng.h"

namespace mixlab {

// A draw from Beta(α, α), α > 0: X / (X + Y) with X, Y ~ Gamma(α, 1) (Marsaglia and Tsang).
double beta_symmetric(SplitMix64& rng, double alpha);

// Mixes the batch's images (features [size, pixels], after augment_batch) and sets
// batch.mix_labels and batch.mix_weight, when `augment` asks for mixup or CutMix.
void mix_batch(Batch& batch, const ImageAugmentation& augment, uint64_t seed, int64_t epoch);

}  // namespace mixlab
