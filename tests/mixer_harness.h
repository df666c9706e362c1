// The shared mixer test harness: every property of mixers.md §0 and §13, run over every mixer
// in the registry. A new mixer is covered by registering it (with its test names, and the option
// sets that change what it computes as its test options).
#pragma once
#include <doctest/doctest.h>

#include <map>
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

// One configuration the shared tests run: a test name and the options it is built with.
struct MixerCase {
  std::string name;
  std::map<std::string, std::string> options;
  // "attention rel-bias=3", what a failure names. A member, not a function, because INFO
  // keeps a reference to what it is given until the scope ends.
  std::string label;

  MixerCase(std::string test_name, std::map<std::string, std::string> test_options = {})
      : name(std::move(test_name)), options(std::move(test_options)), label(name) {
    for (const auto& [key, value] : options) label += " " + key + "=" + value;
  }
};

// Every test name with the default options, then each entry's test option sets on its first
// test name (MixerInfo::test_options).
inline std::vector<MixerCase> all_test_cases() {
  std::vector<MixerCase> cases;
  for (const auto& info : MixerRegistry::instance().all()) {
    for (const auto& n : info.test_names) cases.emplace_back(n);
    for (const auto& options : info.test_options)
      cases.emplace_back(info.test_names.front(), options);
  }
  return cases;
}

inline MixerConfig small_config(const MixerCase& mc, bool causal = false) {
  MixerConfig c = small_config(mc.name, causal);
  c.options = mc.options;
  return c;
}

// What an instance built with the case's options supports (options can change it).
inline MixerCapabilities case_capabilities(const MixerCase& mc, bool causal = false) {
  return MixerRegistry::instance().capabilities(small_config(mc, causal));
}

inline std::shared_ptr<Mixer> build64(const MixerConfig& c) {
  auto m = make_mixer(c);
  m->to(DType::F64);
  m->eval();
  return m;
}

// A case's mixer in float64 for the property tests. Every parameter that starts at zero (the
// biases, a relative position bias table, resmlp's a) gets random values first: a property
// that held only while they are zero would otherwise pass.
inline std::shared_ptr<Mixer> build_case(const MixerCase& mc, bool causal = false) {
  auto m = build64(small_config(mc, causal));
  uint64_t seed = 101;
  for (auto& p : m->parameters()) {
    ++seed;
    bool all_zero = true;
    for (double v : p.to_double_vector()) all_zero = all_zero && v == 0.0;
    if (!all_zero) continue;
    Generator gen(seed);
    assign_in_place(p, Tensor::uniform(p.shape(), -0.5, 0.5, gen, DType::F64));
  }
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

// Decodes x [B, N, d] position by position with step() and checks each output against row t
// of the full causal forward.
inline void check_decoding_equals_forward(Mixer& m, const Tensor& x) {
  NoGradGuard no_grad;
  MixerContext ctx = context_for(x, {}, true);
  Tensor full = m.forward(x, ctx);
  auto cache = m.new_cache();
  for (int64_t t = 0; t < x.size(1); ++t) {
    INFO("position " << t);
    Tensor y_t = m.step(contiguous(narrow(x, 1, t, 1)), *cache, ctx);
    REQUIRE(y_t.shape() == Shape{x.size(0), 1, x.size(2)});
    for (int64_t b = 0; b < x.size(0); ++b)
      check_close(rows_of(y_t, b, 0, 1), rows_of(full, b, t, t + 1), 1e-10);
  }
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
