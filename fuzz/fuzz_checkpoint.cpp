// The checkpoint loader (train/run/checkpoint.h) on a small model with an AdamW optimizer.
// The first byte's low bit chooses whether the input (the rest) keeps its own checksum or, when it
// parses as safetensors, gets a valid one, so that the checks behind the checksum (names, shapes,
// dtypes, finite values, training and optimizer state) are reached too. Every input is loaded or
// refused with Error, and a refused load leaves the model unchanged.
//
// MIXLAB_FUZZ_WRITE_SEEDS=DIR writes a valid training checkpoint and weights file of the model
// into DIR and exits: they are fuzz/corpus/safetensors/, and with a first byte 0 or 1 in front,
// fuzz/corpus/checkpoint/.
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "fuzz/fuzz_input.h"
#include "nn/layers.h"
#include "train/run/checkpoint.h"
#include "train/optim/optimizer.h"
#include "core/settings.h"

namespace {

using namespace mixlab;

struct Model : Module {
  std::shared_ptr<Linear> a, b;
  Model() {
    Generator gen(1);
    a = register_module("a", std::make_shared<Linear>(3, 2, true, gen));
    b = register_module("b", std::make_shared<Linear>(2, 2, false, gen));
  }
  std::string type_name() const override { return "Model"; }
};

struct Setup {
  Model model;
  AdamW optimizer{param_groups(model, 0.01), AdamOptions{}};
  Setup() {
    for (auto& [name, p] : model.named_parameters()) p.set_grad(Tensor::full(p.shape(), 0.5));
    optimizer.step();
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

std::vector<float> weights() { return setup().model.a->weight.to_float_vector(); }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = setting(Setting::FuzzWriteSeeds)) {
    TrainingState state;
    state.step = 1;
    state.config_json = "{\"mixer\":\"attention\"}";
    state.extra["best_metric"] = "0.5";
    save_checkpoint(std::string(dir) + "/training.safetensors", setup().model, setup().optimizer,
                    state);
    save_weights(std::string(dir) + "/weights.safetensors", setup().model, {{"note", "seed"}});
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = fuzz::scratch_path("checkpoint");
  std::vector<uint8_t> bytes(data + 1, data + size);
  if ((data[0] & 1) != 0) {
    try {
      SafetensorsFile file = parse_safetensors(bytes, "fuzz input");
      file.metadata["mixlab.checksum"] = checkpoint_checksum(file.tensors, file.metadata);
      bytes = serialize_safetensors(file.tensors, file.metadata);
    } catch (const Error&) {
    }
  }
  fuzz::write_input(path, bytes.data(), bytes.size());
  const std::vector<float> before = weights();
  try {
    load_checkpoint(path, setup().model, setup().optimizer);
    return 0;
  } catch (const Error&) {
    if (weights() != before) std::abort();  // a refused load changed the model
  }
  try {
    load_weights(path, setup().model);
  } catch (const Error&) {
    if (weights() != before) std::abort();
  }
  return 0;
}
