// `mixlab inspect`: one input through a trained model, and every mixing matrix it applied
// (nn/mixing_capture.h) as pictures and raw numbers:
//   OUT/heatmaps/*.svg        one heatmap per layer, head and kind of matrix
//   OUT/patches/*.svg         image classifiers: each patch's weights drawn over the image
//   OUT/index.html            all of them in a grid, with the input and the model's answer
//   OUT/mixing.safetensors    the matrices [B, H, rows, cols] (float64), their labels in the
//                             metadata key "matrices" (JSON)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace mixlab::lab {

struct InspectOptions {
  std::string checkpoint;
  std::string input;   // token models: the text (source text for translators)
  std::string target;  // translators: the target to teacher-force (empty: greedy decoding)
  int64_t image = -1;  // image classifiers: index into the test images of `data`
  std::string data;    // image classifiers: fashion-mnist (default) or a directory of IDX files
  std::string out;
  Device device = Device::cpu();  // where the model runs (the matrices come back to the host)
};

struct InspectResult {
  std::string answer;                 // the prediction or the translation
  std::vector<std::string> heatmaps;  // paths relative to out
  std::string index_html;
};

InspectResult run_inspect(const InspectOptions& options);

}  // namespace mixlab::lab
