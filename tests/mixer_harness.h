// The shared mixer test harness: every property of mixers.md §0 and §13, run over every mixer
// in the registry. A new mixer is covered by registering it (and listing test names).
#pragma once
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "nn/mixer_registry.h"
#include "nn/mixing_capture.h"
#include "tests/test_helpers.h"

namespace mixlab::testing {

// Small sizes so float64 gradchecks over every parameter stay fast.
inline MixerConfig small_config(const std::string& name, bool causal = false) {
  MixerConfig c;
  c.name = name;
  c.dim = 8;
  c.heads = 2;
  c.max_len = 8;
  c.causal = causal;
  c.seed = 11;
  return c;
}

inline std::vector<std::string> all_test_names() {
  std::vector<std::string> names;
  for (const auto& info : MixerRegistry::instance().all())
    for (const auto& n : info.test_names) names.push_back(n);
  return names;
}

inline std::shared_ptr<Mixer> build64(const MixerConfig& c) {
  auto m = make_mixer(c);
  m->to(DType::F64);
  m->eval();
  return m;
}

inline MixerContext context_for(const Tensor& x, const std::vector<int32_t>& lengths, bool causal) {
  MixerContext ctx;
  ctx.causal = causal;
  if (!lengths.empty()) {
    ctx.lengths = lengths;
    ctx.valid = length_mask(lengths, x.size(1), x.dtype(), x.device());
  }
  return ctx;
}

// Rows [b, i, :] of a [B, N, d] tensor as a flat vector.
inline std::vector<double> rows_of(const Tensor& y, int64_t b, int64_t from, int64_t to) {
  NoGradGuard no_grad;
  return contiguous(narrow(narrow(y, 0, b, 1), 1, from, to - from)).to_double_vector();
}

// A mixer's parameter by its dotted name (the test fails when there is none).
inline Tensor param(const Mixer& m, const std::string& name) {
  for (const auto& [n, t] : m.named_parameters())
    if (n == name) return t;
  FAIL("no parameter " << name);
  return Tensor();
}

// Overwrites a parameter with hand-set values (row-major, as many as it holds).
inline void set_param(const Mixer& m, const std::string& name, const std::vector<double>& values) {
  Tensor p = param(m, name);
  REQUIRE(static_cast<int64_t>(values.size()) == p.numel());
  assign_in_place(p, Tensor::from_data(values, p.shape()));
}

// A mixer's output on x and the gradients of sum(y ∘ w) for x and each parameter, as doubles
// (output first, then x's, then the parameters' in order); with `capture`, under a mixing
// recorder, whose forward runs the formula's path (mixing_capture.h), and which must record.
inline std::vector<std::vector<double>> output_and_gradients(Mixer& m, const Tensor& x,
                                                             const Tensor& w,
                                                             const MixerContext& ctx,
                                                             bool capture) {
  m.zero_grad();
  x.zero_grad();
  std::optional<MixingRecorder> recorder;
  if (capture) recorder.emplace(m);
  Tensor y = m.forward(x, ctx);
  sum(mul(y, w)).backward();
  if (capture) CHECK_FALSE(recorder->matrices().empty());
  std::vector<std::vector<double>> out{y.to_double_vector(), x.grad().to_double_vector()};
  for (auto& p : m.parameters()) out.push_back(p.grad().to_double_vector());
  return out;
}

}  // namespace mixlab::testing
