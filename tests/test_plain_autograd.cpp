// The autograd core (autograd/engine.cpp, autograd/node.h) and the gradient routing beside it
// (autograd/gradient_routing.h): the core stays small enough to read in one sitting, and routing
// changes where gradients are written, never what a training step computes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/gradient_routing.h"
#include "autograd/ops.h"
#include "nn/mixer_registry.h"
#include "nn/models.h"
#include "tests/model_configs.h"
#include "train/optim/optimizer.h"

using namespace mixlab;

namespace {

int count_lines(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return static_cast<int>(
      std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
}

// Sets plain autograd for one scope and restores what was there.
struct ScopedPlainAutograd {
  explicit ScopedPlainAutograd(bool on) : previous(plain_autograd()) { set_plain_autograd(on); }
  ~ScopedPlainAutograd() { set_plain_autograd(previous); }
  bool previous;
};

// The parameters of a tiny classifier after three SGD steps on the flat buffer. (SGD, not Adam:
// Adam divides a gradient by its own size, so a gradient that is zero in exact arithmetic, such
// as attention's key bias, turns its rounding noise into steps of the full learning rate.)
std::vector<float> trained_parameters(const std::string& mixer, bool plain) {
  ScopedPlainAutograd mode(plain);
  Classifier model(testing::tiny_classifier(mixer));
  SgdOptions options;
  options.lr = 0.1, options.momentum = 0.9, options.flat_buffer = true;
  Sgd optimizer(param_groups(model, 0.01), options);
  CHECK(optimizer.is_flat());
  Tensor tokens = Tensor::from_data(
      std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7}, {2, 8});
  Tensor labels = Tensor::from_data(std::vector<int32_t>{0, 2}, {2});
  for (int step = 0; step < 3; ++step) {
    cross_entropy(model.forward(tokens, {8, 6}), labels).backward();
    optimizer.step();
    optimizer.zero_grad();
  }
  std::vector<float> values;
  for (const Tensor& p : model.parameters()) {
    std::vector<float> v = p.to_float_vector();
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

}  // namespace

TEST_CASE("autograd core: engine.cpp and node.h together are at most 150 lines") {
  const std::string dir = MIXLAB_SOURCE_DIR "/autograd/";
  const int lines = count_lines(dir + "engine.cpp") + count_lines(dir + "node.h");
  INFO("engine.cpp + node.h: ", lines, " lines");
  CHECK(lines <= 150);
}

TEST_CASE("autograd core: a training step gives the same parameters with routing and plain") {
  // attention: the packed [W_Q; W_K; W_V] (adjacent concat) and layer norms (pending gradients);
  // gmlp: the halves of U (leaf windows); every linear layer: grad slots.
  for (const std::string mixer : {"attention", "gmlp"}) {
    if (!MixerRegistry::instance().contains(mixer)) continue;
    INFO(mixer);
    const std::vector<float> routed = trained_parameters(mixer, false);
    const std::vector<float> plain = trained_parameters(mixer, true);
    REQUIRE(routed.size() == plain.size());
    double worst = 0.0;
    for (size_t i = 0; i < routed.size(); ++i)
      worst = std::max(worst, std::fabs(double(routed[i]) - plain[i]) /
                                  std::max(1e-3, std::fabs(double(plain[i]))));
    INFO("worst relative difference: ", worst);
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("autograd core: plain autograd leaves gradients outside the grad slots") {
  // The switch is applied: with routing a parameter's gradient is its slot, plain it is not.
  for (bool plain : {false, true}) {
    ScopedPlainAutograd mode(plain);
    Tensor w = Tensor::from_data(std::vector<float>{1, 2, 3}, {3}).set_requires_grad();
    AdamOptions options;
    options.flat_buffer = true;
    AdamW optimizer({ParamGroup({w})}, options);
    sum(mul(w, w)).backward();
    CHECK(w.grad().to_float_vector() == std::vector<float>{2, 4, 6});
    CHECK(w.grad().same_as(w.grad_slot()) == !plain);
  }
}
