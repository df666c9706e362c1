// What a checkpoint says about itself, from its safetensors metadata alone: the model
// configuration it was trained with, its vocabularies and the trainer's extra keys. Shared by
// the commands (apps/) and the lab (lab/), which both open checkpoints they did not write.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "nn/model_config.h"

namespace mixlab {

struct CheckpointInfo {
  ModelConfig config;
  int64_t step = -1, epoch = -1;  // a training checkpoint's position (-1: a weights file)
  std::string vocab_src, vocab_tgt;
  std::map<std::string, std::string> extra;
};

// Error when the file is missing or holds no model configuration.
CheckpointInfo read_checkpoint_info(const std::string& path);

}  // namespace mixlab
