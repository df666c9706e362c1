// A program built against an installed mixlab (find_package or pkg-config). It prints every
// registered mixer, which shows the linker kept each mixer's object file without
// --whole-archive, then trains a tiny classifier on one fixed batch with the mixer named on the
// command line and prints the loss before and after, which shows the library computes.
//
// Expected output (the losses vary with the mixer):
//   mixers: attention synth-dense ... (every registered name)
//   mixer fnet: loss 1.39 -> 0.02
#include <cstdio>
#include <string>

#include <mixlab/autograd/ops.h>
#include <mixlab/nn/mixer_registry.h>
#include <mixlab/nn/models.h>
#include <mixlab/train/optim/optimizer.h>

int main(int argc, char** argv) {
  using namespace mixlab;
  std::string names;
  for (const MixerInfo& info : MixerRegistry::instance().all()) names += " " + info.name;
  std::printf("mixers:%s\n", names.c_str());

  // The configuration as a checkpoint stores it (JSON), which also exercises train/json.h.
  ModelConfig config = ModelConfig::from_json(Json::parse(
      R"({"mixer": "attention", "dim": 16, "heads": 2, "layers": 1, "max_len": 8,
          "dropout": 0.0, "vocab": 10, "classes": 4})"));
  if (argc > 1) config.mixer = argv[1];
  Classifier model(config);
  Adam adam(param_groups(model, 0.0), AdamOptions{.lr = 1e-2});

  // Four sequences of 8 tokens, each labelled by its first token.
  std::vector<int32_t> tokens;
  for (int32_t row = 0; row < 4; ++row)
    for (int32_t i = 0; i < 8; ++i) tokens.push_back(i == 0 ? row : (row * 3 + i) % 10);
  const Tensor inputs = Tensor::from_data(tokens, {4, 8});
  const Tensor labels = Tensor::from_data(std::vector<int32_t>{0, 1, 2, 3}, {4});

  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor loss = cross_entropy(model.forward(inputs), labels);
    adam.zero_grad();
    loss.backward();
    adam.step();
    (step == 0 ? first : last) = loss.item();
  }
  std::printf("mixer %s: loss %.2f -> %.2f\n", config.mixer.c_str(), first, last);
  return last < first / 4 ? 0 : 1;
}
