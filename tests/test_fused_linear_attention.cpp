// Linear attention's fused core (fused_linear_attention, autograd/ops/attention.cpp) against the
// composition it replaces in float32, in the mixer (padded keys, the inspect recorder), its
// determinism for a given thread count, and its refusals. Float64 finite differences and the
// comparison with a plain C++ formula are rows of the op harness (tests/op_cases.cpp, kernels
// linear_attention and linear_attention_backward).
#include "core/parallel.h"
#include "nn/mixers/common.h"
#include "tests/mixer_harness.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

struct LinearAttentionGrads {
  std::vector<double> out, dq, dk, dv;
};

// Features in [0.05, 2], positive as φ = elu + 1 makes them (rand32 is uniform in [-1, 1)).
Tensor feature_leaf(const Shape& shape, uint64_t seed) {
  Tensor t = add(mul(rand32(shape, seed), 0.975), 1.025);
  t.set_requires_grad(true);
  return t;
}

// out and the gradients of sum(out ∘ w) for fixed weights w; fused or as the composition, in
// float32 or float64 (the same values, cast).
LinearAttentionGrads run_linear_attention(bool fused, const Shape& qs, const Shape& ks,
                                          const Shape& vs, DType dtype = DType::F32) {
  Tensor q = feature_leaf(qs, 1), k = feature_leaf(ks, 2), v = rand32(vs, 3);
  v.set_requires_grad(true);
  if (dtype != DType::F32) {
    for (Tensor* t : {&q, &k, &v}) {
      *t = cast(t->detach(), dtype);
      t->set_requires_grad(true);
    }
  }
  const double eps = 1e-6;
  Tensor out;
  if (fused) {
    out = fused_linear_attention(q, k, v, eps);
  } else {
    Tensor s = matmul(transpose(k, 2, 3), v);
    Tensor z = sum(k, {2}, true);
    out = div(matmul(q, s), add(matmul(q, transpose(z, 2, 3)), eps));
  }
  Tensor w = cast(rand32(out.shape(), 4), dtype);
  sum(mul(out, w)).backward();
  return {contiguous(out).to_double_vector(), q.grad().to_double_vector(),
          k.grad().to_double_vector(), v.grad().to_double_vector()};
}

// The largest error of `got` against `ref`, relative to ref's largest magnitude: the sums here
// cancel (v's entries have either sign), so an element's own size says little about its error.
double worst(const std::vector<double>& got, const std::vector<double>& ref) {
  double most = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    most = std::max(most, std::abs(got[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return most / scale;
}

}  // namespace

TEST_CASE("fused_linear_attention: agrees with the composition in float32") {
  // The classifier's heads (49 tokens of 32), N != M with E != D, widths past a register.
  for (const auto& shapes :
       std::vector<std::vector<Shape>>{{{3, 4, 49, 32}, {3, 4, 49, 32}, {3, 4, 49, 32}},
                                       {{2, 2, 5, 8}, {2, 2, 9, 8}, {2, 2, 9, 3}},
                                       {{1, 3, 17, 20}, {1, 3, 13, 20}, {1, 3, 13, 36}}}) {
    INFO("q " << shape_str(shapes[0]) << " v " << shape_str(shapes[2]));
    LinearAttentionGrads fused = run_linear_attention(true, shapes[0], shapes[1], shapes[2]);
    LinearAttentionGrads unfused = run_linear_attention(false, shapes[0], shapes[1], shapes[2]);
    LinearAttentionGrads exact =
        run_linear_attention(false, shapes[0], shapes[1], shapes[2], DType::F64);
    // Both float32 paths against the composition in float64, norm-wise: the fused one errs no
    // more than the composition does (measured: within 1.3x either way, 1e-7 to 6e-6).
    CHECK(worst(fused.out, exact.out) <= 2 * worst(unfused.out, exact.out) + 1e-6);
    CHECK(worst(fused.dq, exact.dq) <= 2 * worst(unfused.dq, exact.dq) + 1e-6);
    CHECK(worst(fused.dk, exact.dk) <= 2 * worst(unfused.dk, exact.dk) + 1e-6);
    CHECK(worst(fused.dv, exact.dv) <= 2 * worst(unfused.dv, exact.dv) + 1e-6);
  }
}

TEST_CASE(
    "fused_linear_attention: the mixer's padded keys change nothing, with or without inspect") {
  MixerConfig c = small_config("linear-attention");
  c.dim = 16, c.heads = 4;
  auto m = make_mixer(c);
  m->eval();
  Tensor x = rand32({2, 6, 16}, 9);
  MixerContext ctx = context_for(x, {6, 3}, false);
  NoGradGuard no_grad;
  std::vector<double> out = m->forward(x, ctx).to_double_vector();
  // Item 1 has 3 tokens: its padded rows of x are garbage that must not reach its real rows.
  Tensor changed = x.clone();
  narrow(narrow(changed, 0, 1, 1), 1, 3, 3).fill_(1e3);
  std::vector<double> again = m->forward(changed, ctx).to_double_vector();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c0 = 0; c0 < 16; ++c0)
      CHECK(again[(6 + i) * 16 + c0] == doctest::Approx(out[(6 + i) * 16 + c0]).epsilon(1e-5));
  MixingRecorder recorder(*m);
  check_close(m->forward(x, ctx).to_double_vector(), out, 1e-7);
  CHECK_FALSE(recorder.matrices().empty());
}

TEST_CASE("fused_linear_attention: repeats bit for bit for a given thread count") {
  int saved = num_threads();
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    set_num_threads(threads);
    LinearAttentionGrads first =
        run_linear_attention(true, {4, 4, 49, 32}, {4, 4, 49, 32}, {4, 4, 49, 32});
    LinearAttentionGrads again =
        run_linear_attention(true, {4, 4, 49, 32}, {4, 4, 49, 32}, {4, 4, 49, 32});
    CHECK(first.out == again.out);
    CHECK(first.dq == again.dq);
    CHECK(first.dk == again.dk);
    CHECK(first.dv == again.dv);
  }
  set_num_threads(saved);
}

TEST_CASE("fused_linear_attention: wrong shapes name the op and the shapes") {
  Tensor q = rand32({2, 2, 3, 4}, 1), k = rand32({2, 2, 5, 4}, 2), v = rand32({2, 2, 5, 6}, 3);
  CHECK_THROWS_WITH_AS(fused_linear_attention(q, rand32({2, 2, 5, 3}, 4), v, 1e-6),
                       doctest::Contains("fused_linear_attention: shapes do not fit q [B, H, N, "
                                         "D], k [B, H, M, D], v [B, H, M, E]: q [2,2,3,4], k "
                                         "[2,2,5,3]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_linear_attention(q, k, cast(v, DType::F64), 1e-6),
                       doctest::Contains("fused_linear_attention: dtypes differ"), Error);
}
