// The plain struct that configures a classifier or a translator (mixers.md §1). It prints,
// saves to JSON (stored in every checkpoint's metadata) and loads back.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "io/json.h"
#include "nn/layers.h"  // PositionKind, beside the PositionalEmbedding it selects

namespace mixlab {

// The closed choices of a configuration. In JSON (model.json, every checkpoint) and on the
// command line they are the names to_string gives; parse_X reads them back and names the
// valid ones when a name is wrong.
enum class ModelTask { Classify, Translate };
enum class InputKind { Tokens, Image };  // classifier input: token ids or image patches
enum class PoolKind { Mean, Cls };       // mean over valid tokens, or a learned class token
// Image tokens: p×p patches through one Linear, or a convolutional tokenizer (nn/conv_tokenizer.h).
enum class ImageStem { Patch, Conv };
std::string to_string(ModelTask task);   // classify | translate
std::string to_string(InputKind input);  // tokens | image
std::string to_string(PoolKind pool);    // mean | cls
std::string to_string(ImageStem stem);   // patch | conv
ModelTask parse_model_task(std::string_view name);
InputKind parse_input_kind(std::string_view name);
PoolKind parse_pool_kind(std::string_view name);
ImageStem parse_image_stem(std::string_view name);

struct ModelConfig {
  ModelTask task = ModelTask::Classify;
  // Encoder mixer (classifier and translator encoder) and its options.
  std::string mixer = "attention";
  std::map<std::string, std::string> mixer_options;
  // Translator only: the decoder's causal self-mixer and the cross-mixer.
  std::string decoder_mixer = "attention";
  std::map<std::string, std::string> decoder_mixer_options;
  std::string cross = "attention";
  int64_t dim = 64;            // d
  int64_t heads = 4;           // h
  int64_t layers = 2;          // encoder blocks
  int64_t decoder_layers = 2;  // decoder blocks
  int64_t ffn_dim = 0;         // f; 0 means 4d
  int64_t max_len = 64;        // ℓ of the encoder (source / tokens / patches)
  int64_t tgt_max_len = 64;    // ℓ of the decoder
  double dropout = 0.1;
  double drop_path = 0;  // stochastic depth of the deepest block (nn/drop_path.h); 0: off
  PositionKind positions = PositionKind::Learned;
  // Classifier inputs.
  InputKind input = InputKind::Tokens;
  int64_t vocab = 0;  // token vocabulary (classifier) or source vocabulary
  int64_t classes = 0;
  int64_t image_channels = 1, image_height = 28, image_width = 28, patch = 4;
  ImageStem stem = ImageStem::Patch;
  PoolKind pool = PoolKind::Mean;
  // Translator outputs.
  int64_t tgt_vocab = 0;
  bool tie_output = false;  // head weight tied to the target embedding (own bias kept)
  uint64_t seed = 0;

  Json to_json() const;
  static ModelConfig from_json(const Json& json);  // unknown keys are an Error
  std::string str() const;                         // one line per setting
};

}  // namespace mixlab
