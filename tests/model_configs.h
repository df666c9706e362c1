// Small model configurations that several test files build on (and adjust).
#pragma once
#include <string>

#include "nn/model_config.h"

namespace mixlab::testing {

// A one-block token classifier: d = 16, 2 heads, ℓ = 8, vocabulary 10, 3 classes, no dropout.
inline ModelConfig tiny_classifier(const std::string& mixer) {
  ModelConfig c;
  c.task = ModelTask::Classify;
  c.mixer = mixer;
  c.dim = 16;
  c.heads = 2;
  c.layers = 1;
  c.max_len = 8;
  c.vocab = 10;
  c.classes = 3;
  c.dropout = 0.0;
  c.seed = 5;
  return c;
}

// A translator of one encoder and two decoder blocks: d = 16, 2 heads, ℓ = 8, vocabularies 10
// and 7, no dropout.
inline ModelConfig tiny_translator(const std::string& encoder, const std::string& decoder) {
  ModelConfig c;
  c.task = ModelTask::Translate;
  c.mixer = encoder;
  c.decoder_mixer = decoder;
  c.dim = 16;
  c.heads = 2;
  c.layers = 1;
  c.decoder_layers = 2;
  c.max_len = 8;
  c.tgt_max_len = 8;
  c.vocab = 10;
  c.tgt_vocab = 7;
  c.dropout = 0.0;
  c.seed = 6;
  return c;
}

}  // namespace mixlab::testing
