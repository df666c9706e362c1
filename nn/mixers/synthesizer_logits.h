// The Synthesizer family's sources of logits (mixers.md §3): one component per kind, R, Fix, D,
// FR, FD and V, each giving L [B or 1, h, N, N] for a sequence and row i of it while decoding.
// The mixer that combines them, softmax(Σ_c α_c L^{(c)} + M) V, is nn/mixers/synthesizer.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "core/random.h"
#include "nn/layers.h"
#include "nn/mixer.h"

namespace mixlab::synthesizer {

enum class Kind { R, Fix, D, FR, FD, V };

// How a component registers its tensors on the mixer that owns it.
struct Registrar {
  const MixerConfig& config;
  Generator& gen;
  std::function<Tensor(const std::string&, Tensor)> parameter;
  std::function<Tensor(const std::string&, Tensor)> buffer;
  std::function<std::shared_ptr<Linear>(const std::string&, int64_t, int64_t)> linear;
};

// One source of logits. `logits` gives L [B or 1, h, N, N] for a whole sequence; `row` gives row
// i, [B or 1, h, 1, i+1], from position i's input x_t [B, 1, d] (and its own decoding state).
//
// `alpha`, when defined, is the component's mixture weight α_c (one element): the result is
// α_c L instead of L. Each component multiplies it into its table or into its last linear map's
// weights, which are a few thousand numbers, instead of into the [B, h, N, N] logits: in a mix
// that saves a full-size multiply forward and two full-size passes backward per component.
class Component {
 public:
  virtual ~Component() = default;
  virtual Tensor logits(const Tensor& x, const Tensor& alpha = Tensor()) const = 0;
  virtual Tensor row(const Tensor& x_t, int64_t i, Tensor& state,
                     const Tensor& alpha = Tensor()) const = 0;
};

// A kind's name, parameter count and constructor (kind_info(k).make(reg) builds one).
struct KindInfo {
  Kind kind;
  const char* name;  // as written in synth-mix:C1+...+CM
  // Trainable parameters of the component (the Σ terms of the mix formula).
  int64_t (*parameters)(const MixerConfig& c);
  std::unique_ptr<Component> (*make)(Registrar& reg);
};
const KindInfo& kind_info(Kind k);

// "synth-mix:R+V" -> {R, V}; unknown, duplicate or missing components are MixerSpecErrors.
std::vector<Kind> parse_mix(const std::string& name);

// A V component's query and key maps as {W_Q', b_Q', W_K, b_K}, W_Q' and b_Q' carrying α/√d_h:
// the mixer stacks them with W_V into one projection whose Q' and K the attention core reads in
// place. `v` is a component that kind_info(Kind::V).make built.
std::vector<Tensor> dot_product_projections(const Component& v, const Tensor& alpha);

}  // namespace mixlab::synthesizer
