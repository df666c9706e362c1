// How much memory a model configuration asks for, counted from its sizes before any tensor is
// allocated: a configuration built from user input (--dim 65536, max_len=1e12 in a config file,
// a vocabulary read from data) is refused with a message naming the setting that makes it too
// big, never left to end in std::bad_alloc.
#pragma once
#include <cstdint>
#include <string>

#include "nn/model_config.h"

namespace mixlab {

// Bytes per parameter when training: the weight, its gradient and two Adam moments, in float32.
inline constexpr double kTrainingBytesPerParameter = 16;

// The parameter count of a configuration (in double: the sizes may be absurd), the mixers' own
// counts taken from the registry.
double planned_parameters(const ModelConfig& c);

// Throws Error when training the configuration would need more than `memory_bytes` (default:
// this machine's physical memory), naming the largest part and the setting behind it.
void check_model_size(const ModelConfig& c, double memory_bytes = 0);

// Throws Error when one training batch of `batch` examples at the full max_len would keep more
// activations than `memory_bytes` (default: physical memory), naming --batch. The count is a
// lower bound: per block, the FFN's hidden layer and four model-width tensors of every token,
// which every mixer keeps for the backward pass, so only a batch that cannot fit is refused.
void check_batch_size(const ModelConfig& c, int64_t batch, double memory_bytes = 0);

// This machine's physical memory in bytes (0 when unknown).
double physical_memory_bytes();

}  // namespace mixlab
