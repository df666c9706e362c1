// The attention core's choice (nn/attention_core.h): Math runs the equation's ops where Fused
// runs the backends' fused kernels, with the same outputs and gradients, on every mixer that
// routes its softmax attention through the choice.
#include <functional>
#include <set>
#include <string>

#include "autograd/node.h"
#include "nn/attention_core.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// Sets the core for one scope and puts back the one before.
class CoreScope {
 public:
  explicit CoreScope(AttentionCore core) : before_(attention_core()) { set_attention_core(core); }
  ~CoreScope() { set_attention_core(before_); }
  CoreScope(const CoreScope&) = delete;
  CoreScope& operator=(const CoreScope&) = delete;

 private:
  AttentionCore before_;
};

// The names of the recorded ops y was computed by.
std::set<std::string> ops_behind(const Tensor& y) {
  std::set<std::string> names;
  std::set<const Node*> seen;
  std::function<void(const Tensor&)> walk = [&](const Tensor& t) {
    const auto& node = t.grad_fn();
    if (!node || !seen.insert(node.get()).second) return;
    names.insert(node->name);
    for (const Tensor& input : node->inputs) walk(input);
  };
  walk(y);
  return names;
}

bool any_fused_softmax_core(const std::set<std::string>& ops) {
  for (const std::string& op : ops)
    if (op.rfind("fused_", 0) == 0 && op.find("attention") != std::string::npos &&
        op != "fused_linear_attention")
      return true;
  return false;
}

bool any_softmax(const std::set<std::string>& ops) {
  for (const std::string& op : ops)
    if (op.find("softmax") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("attention core: names, and set_attention_core's choice stays until changed") {
  CHECK(parse_attention_core("fused", "test") == AttentionCore::Fused);
  CHECK(parse_attention_core("math", "test") == AttentionCore::Math);
  CHECK(std::string(attention_core_name(AttentionCore::Math)) == "math");
  CHECK(std::string(attention_core_name(AttentionCore::Fused)) == "fused");
  for (const char* bad : {"", "Math", "unfused", "flash"})
    CHECK_THROWS_WITH_AS(parse_attention_core(bad, "MIXLAB_ATTENTION_CORE"),
                         doctest::Contains("MIXLAB_ATTENTION_CORE: unknown attention core"), Error);
  {
    CoreScope math(AttentionCore::Math);
    CHECK(attention_core() == AttentionCore::Math);
    CHECK(math_attention());
  }
  CHECK(attention_core() == AttentionCore::Fused);  // the suite runs without the variable
  CHECK_FALSE(math_attention());
}

TEST_CASE(
    "attention core: Math runs the equation's ops, with the fused cores' outputs and "
    "gradients") {
  // Every mixer whose softmax attention goes through the choice: attention's packed
  // self-attention, a synthesizer mix with dot products (the rest as the scores' bias), per-example
  // synthesized logits (D, and D+FD without V), and aMLP's tiny attention. Padded and causal.
  for (const char* name :
       {"attention", "synth-mix:R+V", "synth-mix:D+V", "synth-dense", "synth-mix:D+FD", "amlp"})
    for (bool causal : {false, true}) {
      INFO(name << (causal ? " causal" : " padded"));
      MixerConfig c = small_config(name, causal);
      c.max_len = 6;
      if (std::string(name) == "amlp") c.options["attn-dim"] = "4";
      auto m = build64(c);
      Tensor x = rand64({2, 6, 8}, 61);
      Tensor w = rand64({2, 6, 8}, 62, false);
      MixerContext ctx =
          context_for(x, causal ? std::vector<int32_t>{} : std::vector<int32_t>{6, 4}, causal);
      std::vector<std::vector<double>> fused, math;
      {
        CoreScope core(AttentionCore::Fused);
        fused = output_and_gradients(*m, x, w, ctx, false);
        auto ops = ops_behind(m->forward(x, ctx));
        CHECK(any_fused_softmax_core(ops));
      }
      {
        CoreScope core(AttentionCore::Math);
        math = output_and_gradients(*m, x, w, ctx, false);
        auto ops = ops_behind(m->forward(x, ctx));
        CHECK_FALSE(any_fused_softmax_core(ops));  // the option was applied
        CHECK(any_softmax(ops));
      }
      REQUIRE(fused.size() == math.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO("result " << i);
        check_close(fused[i], math[i], 1e-12);
      }
    }
}

TEST_CASE("cuda: the math attention core agrees with the fused one on the GPU, and with the CPU" *
          doctest::skip(!device_available(DeviceType::CUDA))) {
  // The same check on the CUDA backend, in float64: its fused cores (attention.cu) against its
  // generic ops, and both against the CPU's fused path.
  for (const char* name : {"attention", "synth-mix:R+V", "synth-dense", "amlp"})
    for (bool causal : {false, true}) {
      INFO(name << (causal ? " causal" : " padded"));
      MixerConfig c = small_config(name, causal);
      c.max_len = 6;
      if (std::string(name) == "amlp") c.options["attn-dim"] = "4";
      auto cpu_mixer = build64(c), gpu_mixer = build64(c);
      gpu_mixer->to(Device::cuda(0));
      Tensor x_cpu = rand64({2, 6, 8}, 71), w_cpu = rand64({2, 6, 8}, 72, false);
      Tensor x_gpu = x_cpu.detach().to(Device::cuda(0)).set_requires_grad();
      Tensor w_gpu = w_cpu.to(Device::cuda(0));
      const std::vector<int32_t> lengths =
          causal ? std::vector<int32_t>{} : std::vector<int32_t>{6, 4};
      std::vector<std::vector<double>> cpu, fused, math;
      {
        CoreScope core(AttentionCore::Fused);
        cpu = output_and_gradients(*cpu_mixer, x_cpu, w_cpu, context_for(x_cpu, lengths, causal),
                                   false);
        fused = output_and_gradients(*gpu_mixer, x_gpu, w_gpu, context_for(x_gpu, lengths, causal),
                                     false);
      }
      {
        CoreScope core(AttentionCore::Math);
        math = output_and_gradients(*gpu_mixer, x_gpu, w_gpu, context_for(x_gpu, lengths, causal),
                                    false);
      }
      REQUIRE(fused.size() == math.size());
      REQUIRE(cpu.size() == math.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO("result " << i);
        check_close(fused[i], math[i], 1e-10);
        check_close(cpu[i], math[i], 1e-10);
      }
    }
}
