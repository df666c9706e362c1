// The synthesizers' fused core (fused_synthesized_attention, autograd/ops/attention.cpp) against
// the unfused path it replaces (masked_softmax, then matmul) in float32, in the synthesizer
// mixers with and without a mixing recorder, its determinism for a given thread count, and its
// refusals. Float64 finite differences and the comparison with a plain C++ formula are rows of
// the op harness (tests/op_cases.cpp, kernels synthesized_attention and its backward).
#include "core/parallel.h"
#include "nn/mixers/common.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

struct SynthesizedGrads {
  std::vector<double> out, dlogits, dv;
};

Tensor scaled_leaf32(const Shape& shape, uint64_t seed, double scale) {
  Tensor t = mul(rand32(shape, seed), scale);
  t.set_requires_grad(true);
  return t;
}

// out and the gradients of sum(out ∘ w) for fixed weights w.
SynthesizedGrads run_synthesized(bool fused, const Shape& ls, const Shape& vs, const Tensor& mask) {
  Tensor logits = scaled_leaf32(ls, 1, 6.0), v = scaled_leaf32(vs, 2, 2.0);
  Tensor out = fused ? fused_synthesized_attention(logits, v, mask)
                     : matmul(mixers::masked_softmax(logits, mask), v);
  Tensor w = rand32(out.shape(), 4);
  sum(mul(out, w)).backward();
  return {contiguous(out).to_double_vector(), logits.grad().to_double_vector(),
          v.grad().to_double_vector()};
}

}  // namespace

TEST_CASE("fused_synthesized_attention: agrees with the unfused path in float32") {
  const int64_t b = 3, h = 2, e = 8;
  // 7 tokens take the generic rows (float32 up to 64 keys: registers) as much as 49 and 70 do
  // (70: cblas); the logits per example or shared by the batch.
  for (int64_t n : {7, 49, 70})
    for (bool shared : {false, true}) {
      std::vector<int32_t> lengths{static_cast<int32_t>(n), static_cast<int32_t>(n / 2), 1};
      Tensor key_mask = reshape(length_mask(lengths, n), {b, 1, 1, n});
      Tensor causal = tril_mask(n, n);
      for (const auto& item : std::vector<std::pair<const char*, Tensor>>{
               {"no mask", Tensor()},
               {"padded keys", key_mask},
               {"causal", causal},
               {"causal and padded", mul(key_mask, causal)}}) {
        INFO(n << " tokens, " << (shared ? "shared" : "per-example") << " logits, " << item.first);
        Shape ls{shared ? 1 : b, h, n, n}, vs{b, h, n, e};
        SynthesizedGrads fused = run_synthesized(true, ls, vs, item.second),
                         unfused = run_synthesized(false, ls, vs, item.second);
        check_close(fused.out, unfused.out, 2e-6);
        check_close(fused.dlogits, unfused.dlogits, 2e-5);
        check_close(fused.dv, unfused.dv, 2e-5);
      }
    }
}

TEST_CASE(
    "fused_synthesized_attention: synthesizers give the same output with inspect's recorder") {
  // D and FD take the fused core, R under a padding mask too; R without one keeps the shared
  // softmax (both paths are the recorder's then, and must still agree with themselves).
  for (const char* name : {"synth-dense", "synth-fdense", "synth-random", "synth-mix:R+V"})
    for (bool causal : {false, true}) {
      INFO(name << (causal ? ", causal" : ", bidirectional"));
      MixerConfig c = small_config(name, causal);
      c.dim = 16, c.heads = 4;
      auto m = make_mixer(c);
      m->eval();
      Tensor x = rand32({2, 6, 16}, 9);
      MixerContext ctx = context_for(x, {6, 3}, causal);
      NoGradGuard no_grad;
      std::vector<double> fused = m->forward(x, ctx).to_double_vector();
      MixingRecorder recorder(*m);  // the unfused path forms and records the weights
      std::vector<double> unfused = m->forward(x, ctx).to_double_vector();
      check_close(fused, unfused, 2e-6);
      REQUIRE_FALSE(recorder.matrices().empty());
      const MixingMatrix& a = recorder.matrices()[0];
      CHECK(a.at(1, 2, 2, 4) == 0.0);  // a padded key of item 1 (length 3)
    }
}

TEST_CASE("fused_synthesized_attention: repeats bit for bit for a given thread count") {
  int saved = num_threads();
  for (int threads : {1, 2})
    for (int64_t n : {12, 49, 70}) {  // registers, and cblas
      INFO(threads << " threads, " << n << " tokens");
      set_num_threads(threads);
      Tensor causal = tril_mask(n, n);
      SynthesizedGrads first = run_synthesized(true, {4, 4, n, n}, {4, 4, n, 16}, causal);
      SynthesizedGrads again = run_synthesized(true, {4, 4, n, n}, {4, 4, n, 16}, causal);
      CHECK(first.out == again.out);
      CHECK(first.dlogits == again.dlogits);
      CHECK(first.dv == again.dv);
    }
  set_num_threads(saved);
}

TEST_CASE("fused_synthesized_attention: wrong shapes name the op and the shapes") {
  Tensor logits = rand32({2, 3, 4, 5}, 1), v = rand32({2, 3, 5, 6}, 2);
  CHECK_THROWS_WITH_AS(fused_synthesized_attention(logits, rand32({2, 3, 4, 6}, 3), Tensor()),
                       doctest::Contains("fused_synthesized_attention: shapes do not fit logits "
                                         "[B or 1, H, N, M], v [B, H, M, E]: logits [2,3,4,5], "
                                         "v [2,3,4,6]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_synthesized_attention(rand32({3, 3, 4, 5}, 4), v, Tensor()),
                       doctest::Contains("shapes do not fit"), Error);
  CHECK_THROWS_WITH_AS(fused_synthesized_attention(reshape(logits, {6, 4, 5}), v, Tensor()),
                       doctest::Contains("fused_synthesized_attention: needs logits"), Error);
  CHECK_THROWS_WITH_AS(fused_synthesized_attention(logits, v, tril_mask(4, 4)),
                       doctest::Contains("fused_synthesized_attention: the mask [4,4] does not "
                                         "broadcast to the scores [B, H, N, M] = [2,3,4,5]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_synthesized_attention(logits, cast(v, DType::F64), Tensor()),
                       doctest::Contains("fused_synthesized_attention: dtypes differ"), Error);
}
