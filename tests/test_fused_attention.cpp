// The fused attention core (autograd/ops/attention.cpp) against the unfused path it replaces
// (matmul, scale, masked_softmax, matmul) in float32, in the attention mixer with and without a
// mixing recorder, its determinism for a given thread count, and its refusals. Float64 finite
// differences and the comparison with a plain C++ formula are rows of the op harness
// (tests/op_cases.cpp, kernels attention and attention_backward).
#include "backends/cpu/simd/attention_short_keys.h"
#include "backends/cpu/caching_allocator.h"
#include "backends/cpu/simd/kernel_registers.h"
#include "backends/kernel_products.h"
#include "core/parallel.h"
#include "nn/mixers/common.h"
#include "tests/mixer_harness.h"
#include "tests/skip.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

struct AttentionGrads {
  std::vector<double> out, dq, dk, dv;
};

Tensor attention_leaf32(const Shape& shape, uint64_t seed) {
  Tensor t = mul(rand32(shape, seed), 2.0);
  t.set_requires_grad(true);
  return t;
}

// out and the gradients of sum(out ∘ w) for fixed weights w.
AttentionGrads run_attention(bool fused, const Shape& qs, const Shape& ks, const Shape& vs,
                             const Tensor& mask) {
  Tensor q = attention_leaf32(qs, 1), k = attention_leaf32(ks, 2), v = attention_leaf32(vs, 3);
  double scale = 1.0 / std::sqrt(static_cast<double>(qs[3]));
  Tensor out =
      fused ? fused_attention(q, k, v, mask, scale)
            : matmul(mixers::masked_softmax(mul(matmul(q, transpose(k, -1, -2)), scale), mask), v);
  Tensor w = rand32(out.shape(), 4);
  sum(mul(out, w)).backward();
  return {contiguous(out).to_double_vector(), q.grad().to_double_vector(),
          k.grad().to_double_vector(), v.grad().to_double_vector()};
}

void check_grads_agree(const AttentionGrads& a, const AttentionGrads& b) {
  check_close(a.out, b.out, 2e-6);
  check_close(a.dq, b.dq, 2e-5);
  check_close(a.dk, b.dk, 2e-5);
  check_close(a.dv, b.dv, 2e-5);
}

}  // namespace

TEST_CASE("fused_attention: agrees with the unfused path in float32, values and gradients") {
  const int64_t b = 3, h = 2, d = 8;
  // 7 keys: one register of them; 49 (the classifier's): several, formed in blocks of registers
  // with AVX2, and softmax rows interleaved by group (attention_short_keys.cpp).
  for (int n : {7, 49}) {
    Tensor keys = length_mask({n, n - 3, 2}, n);    // [B, N] padded keys
    Tensor key_mask = reshape(keys, {b, 1, 1, n});  // as mixers::key_mask makes it
    Tensor causal = tril_mask(n, n);                // [N, N]
    Tensor both = mul(key_mask, causal);            // [B, 1, N, N]
    // (a pair, not a structured binding: clang 14 cannot capture a binding in INFO's lambda)
    for (const auto& item :
         std::vector<std::pair<const char*, Tensor>>{{"no mask", Tensor()},
                                                     {"padded keys", key_mask},
                                                     {"causal", causal},
                                                     {"causal and padded", both}}) {
      const char* what = item.first;
      const Tensor& mask = item.second;
      INFO(what);
      INFO(n << " tokens");
      check_grads_agree(run_attention(true, {b, h, n, d}, {b, h, n, d}, {b, h, n, d}, mask),
                        run_attention(false, {b, h, n, d}, {b, h, n, d}, {b, h, n, d}, mask));
    }
  }
  // Cross-attention: 5 queries, 9 keys of another width, padded memory and two queries that see
  // nothing (their rows are 0 on both paths, and so are their gradients).
  std::vector<double> cells(static_cast<size_t>(b * 5 * 9), 1.0);
  for (int64_t j = 0; j < 9; ++j) cells[(0 * 5 + 4) * 9 + j] = cells[(2 * 5 + 0) * 9 + j] = 0;
  for (int64_t j = 6; j < 9; ++j)
    for (int64_t i = 0; i < 5; ++i) cells[(1 * 5 + i) * 9 + j] = 0;
  Tensor cross = Tensor::from_data(std::vector<float>(cells.begin(), cells.end()), {b, 1, 5, 9});
  AttentionGrads fused = run_attention(true, {b, h, 5, d}, {b, h, 9, d}, {b, h, 9, 3}, cross);
  check_grads_agree(fused, run_attention(false, {b, h, 5, d}, {b, h, 9, d}, {b, h, 9, 3}, cross));
  for (int64_t hh = 0; hh < h; ++hh)
    for (int64_t c = 0; c < 3; ++c) {
      CHECK(fused.out[((0 * h + hh) * 5 + 4) * 3 + c] == 0.0);
      CHECK(fused.out[((2 * h + hh) * 5 + 0) * 3 + c] == 0.0);
    }
  for (int64_t c = 0; c < d; ++c) CHECK(fused.dq[((2 * h + 1) * 5 + 0) * d + c] == 0.0);
}

TEST_CASE("fused_attention: the attention mixer gives the same output with inspect's recorder") {
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "bidirectional"));
    MixerConfig c = small_config("attention", causal);
    c.dim = 16, c.heads = 4;
    auto m = make_mixer(c);
    m->eval();
    Tensor x = rand32({2, 6, 16}, 9);
    MixerContext ctx = context_for(x, {6, 3}, causal);
    NoGradGuard no_grad;
    std::vector<double> fused = m->forward(x, ctx).to_double_vector();
    MixingRecorder recorder(*m);  // the unfused path forms and records the probabilities
    std::vector<double> unfused = m->forward(x, ctx).to_double_vector();
    check_close(fused, unfused, 2e-6);
    REQUIRE(recorder.matrices().size() == 1);
    const MixingMatrix& a = recorder.matrices()[0];
    CHECK(a.shape == std::vector<int64_t>{2, 4, 6, 6});
    double row = 0;
    for (int64_t j = 0; j < 6; ++j) row += a.at(1, 2, 2, j);
    CHECK(row == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(a.at(1, 2, 2, 4) == 0.0);  // a padded key of item 1 (length 3)
  }
}

// Which items the register core takes (the op harness checks its values against float64 on both
// sides of each limit): where the kernels have AVX2 or AVX-512, it must, or the speed is gone
// without a test noticing.
TEST_CASE("fused_attention: float32 items of up to 64 keys take the register core") {
  if (std::string(cpu::kernel_registers()) == "generic")
    MIXLAB_SKIP_TEST("CPU kernels built without AVX2 or AVX-512");
  const cpu::MaskRows<float> none;
  CHECK(cpu::short_keys_fit(1, 32, 32, none));
  CHECK(cpu::short_keys_fit(12, 32, 32, none));  // the translator's heads
  CHECK(cpu::short_keys_fit(49, 32, 32, none));  // the classifier's
  CHECK(cpu::short_keys_fit(64, 1, 1, none));
  CHECK_FALSE(cpu::short_keys_fit(65, 32, 32, none));  // tiles
  const float marks[24] = {};
  CHECK(cpu::short_keys_fit(12, 32, 32, {marks, 12, 1}));
  CHECK_FALSE(cpu::short_keys_fit(12, 32, 32, {marks, 1, 2}));  // strided along the keys: tiles
}

// MIXLAB_DEBUG's second table (backends/kernel_products.h): with counting on, the core's
// workers report their cycles and, within them, their products' cycles; with it off, nothing.
// Both the register core (49 keys) and the tiles (80 keys, float64) are products in part.
TEST_CASE("fused_attention: MIXLAB_DEBUG's counters see the core's products as a part of it") {
  const bool was = kernel_products::counting();
  auto fused_step = [](const Shape& shape, DType dtype) {
    Tensor q = cast(rand32(shape, 1), dtype), k = cast(rand32(shape, 2), dtype),
           v = cast(rand32(shape, 3), dtype);
    for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
    sum(fused_attention(q, k, v, Tensor(), 0.25)).backward();
  };
  // (Not structured bindings: CAPTURE's lambda may not name them in C++17.)
  for (const auto& item :
       {std::pair{Shape{2, 2, 49, 16}, DType::F32}, std::pair{Shape{1, 2, 80, 8}, DType::F64}}) {
    const Shape& shape = item.first;
    const DType dtype = item.second;
    CAPTURE(shape[2]);
    kernel_products::set_counting(false);
    kernel_products::take();  // whatever an earlier kernel left
    fused_step(shape, dtype);
    const kernel_products::Totals off = kernel_products::take();
    CHECK(off.all == 0);
    CHECK(off.products == 0);
    kernel_products::set_counting(true);
    fused_step(shape, dtype);
    const kernel_products::Totals on = kernel_products::take();
    CHECK(on.products > 0);
    CHECK(on.products < on.all);
  }
  kernel_products::set_counting(was);
}

TEST_CASE("fused_attention: repeats bit for bit for a given thread count") {
  int saved = num_threads();
  for (int threads : {1, 2})
    for (int64_t n : {12, 40, 72}) {  // rows of keys in registers (attention_short_keys.cpp), tiles
      INFO(threads << " threads, " << n << " tokens");
      set_num_threads(threads);
      Tensor causal = tril_mask(n, n);
      AttentionGrads first =
          run_attention(true, {4, 4, n, 16}, {4, 4, n, 16}, {4, 4, n, 16}, causal);
      AttentionGrads again =
          run_attention(true, {4, 4, n, 16}, {4, 4, n, 16}, {4, 4, n, 16}, causal);
      CHECK(first.out == again.out);
      CHECK(first.dq == again.dq);
      CHECK(first.dk == again.dk);
      CHECK(first.dv == again.dv);
    }
  set_num_threads(saved);
}

// A diverging run's scores (about 1e11 here) make every row's weights one-hot: out is the
// winning key's value row, dv sums the rows of dout that chose it, and dq, dk are finite: the
// backward's recomputed probabilities must use the very scores the forward's log-sum-exp came from
// (a product left unrounded by one ulp of 1e11 is exp(8192) = inf).
TEST_CASE("fused_attention: scores of 1e11 give one-hot weights and finite gradients") {
  for (int64_t n : {12, 20}) {  // keys in one register, and tiles
    INFO(n << " tokens");
    const int64_t d = 8;
    auto big_leaf = [](const Shape& shape, uint64_t seed) {
      Tensor t = mul(rand32(shape, seed), 2e5);
      t.set_requires_grad(true);
      return t;
    };
    Tensor q = big_leaf({1, 1, n, d}, 11), k = big_leaf({1, 1, n, d}, 12);
    Tensor v = big_leaf({1, 1, n, d}, 13), w = rand32({1, 1, n, d}, 14);
    Tensor out = fused_attention(q, k, v, Tensor(), 1.0 / std::sqrt(double(d)));
    sum(mul(out, w)).backward();
    std::vector<double> qv = q.to_double_vector(), kv = k.to_double_vector();
    std::vector<double> vv = v.to_double_vector(), wv = w.to_double_vector();
    std::vector<double> expect_out(static_cast<size_t>(n * d)), expect_dv(expect_out.size(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      double best_score = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t c = 0; c < d; ++c) s += qv[i * d + c] * kv[j * d + c];
        if (s > best_score) best_score = s, best = j;
      }
      for (int64_t c = 0; c < d; ++c) {
        expect_out[i * d + c] = vv[best * d + c];
        expect_dv[best * d + c] += wv[i * d + c];
      }
    }
    check_close(contiguous(out).to_double_vector(), expect_out, 1e-6);
    check_close(v.grad().to_double_vector(), expect_dv, 1e-5);
    // dq and dk are 0 up to the rounding of dP − rowsum(dout ∘ out), scaled by keys of 1e5.
    for (double g : q.grad().to_double_vector()) CHECK(std::isfinite(g));
    for (double g : k.grad().to_double_vector()) CHECK(std::isfinite(g));
  }
}

TEST_CASE("fused_attention: wrong shapes name the op and the shapes") {
  Tensor q = rand32({2, 2, 3, 4}, 1), k = rand32({2, 2, 5, 4}, 2), v = rand32({2, 2, 5, 6}, 3);
  CHECK_THROWS_WITH_AS(fused_attention(q, rand32({2, 2, 5, 3}, 4), v, Tensor(), 1.0),
                       doctest::Contains("fused_attention: shapes do not fit q [B, H, N, D], k "
                                         "[B, H, M, D], v [B, H, M, E]: q [2,2,3,4], k [2,2,5,3]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_attention(reshape(q, {4, 3, 4}), k, v, Tensor(), 1.0),
                       doctest::Contains("fused_attention: needs q [B, H, N, D]"), Error);
  CHECK_THROWS_WITH_AS(fused_attention(q, k, v, tril_mask(3, 4), 1.0),
                       doctest::Contains("the mask [3,4] does not broadcast to the scores "
                                         "[B, H, N, M] = [2,2,3,5]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_attention(q, k, cast(v, DType::F64), Tensor(), 1.0),
                       doctest::Contains("fused_attention: dtypes differ"), Error);
  CHECK_THROWS_WITH_AS(fused_attention(q, k, v, Tensor(), 1.0, rand32({2, 3, 3, 5}, 5)),
                       doctest::Contains("fused_attention: the bias [2,3,3,5] does not broadcast "
                                         "to the scores [B, H, N, M] = [2,2,3,5]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_attention(q, k, v, Tensor(), 1.0, rand32({5, 3}, 5)),
                       doctest::Contains("the bias [5,3] does not broadcast"), Error);
  CHECK_THROWS_WITH_AS(fused_attention(q, k, v, Tensor(), 1.0, cast(rand32({3, 5}, 5), DType::F64)),
                       doctest::Contains("fused_attention: the bias [3,5] is float64"), Error);
}

TEST_CASE("fused_attention: a bias gets the gradient of the scores, summed where broadcast") {
  // dL/dbias = dS, the softmax's gradient, which the unfused path gives as the gradient of the
  // logits it adds the bias to; a bias [H, N, M] shared by the batch gets the batch's sum, and a
  // bias that does not need a gradient gets none (the kernel skips writing it).
  Tensor q = attention_leaf32({2, 2, 3, 4}, 1), k = attention_leaf32({2, 2, 5, 4}, 2),
         v = attention_leaf32({2, 2, 5, 6}, 3);
  Tensor bias = attention_leaf32({2, 3, 5}, 4);
  Tensor w = rand32({2, 2, 3, 6}, 5);
  Tensor mask = reshape(length_mask({5, 3}, 5), {2, 1, 1, 5});
  sum(mul(fused_attention(q, k, v, mask, 0.5, bias), w)).backward();
  Tensor bias2 = attention_leaf32({2, 3, 5}, 4);
  Tensor scores = add(mul(matmul(q.detach(), transpose(k.detach(), -1, -2)), 0.5), bias2);
  sum(mul(matmul(mixers::masked_softmax(scores, mask), v.detach()), w)).backward();
  check_close(bias.grad().to_double_vector(), bias2.grad().to_double_vector(), 1e-5);
  Tensor fixed = rand32({2, 3, 5}, 4);
  Tensor q3 = attention_leaf32({2, 2, 3, 4}, 1);
  sum(mul(fused_attention(q3, k.detach(), v.detach(), mask, 0.5, fixed), w)).backward();
  CHECK_FALSE(fixed.grad().defined());
  CHECK(q3.grad().defined());
}

TEST_CASE("fused_self_attention: equals fused_attention on the three parts of qkv, and its grads") {
  // qkv [B, N, 3·H·D] as the attention mixer makes it (X times the three weights stacked), and
  // the same tensor cut into Q, K, V and split into heads by hand; gradients of sum(out ∘ w).
  const int64_t b = 3, n = 7, h = 2, d = 8, width = 3 * h * d;
  Tensor mask = mul(reshape(length_mask({7, 4, 2}, n), {b, 1, 1, n}), tril_mask(n, n));
  Tensor w = rand32({b, h, n, d}, 4);
  Tensor packed = attention_leaf32({b, n, width}, 5);
  Tensor fused = fused_self_attention(packed, h, mask, 0.3);
  sum(mul(fused, w)).backward();
  Tensor parts = attention_leaf32({b, n, width}, 5);  // the same values
  auto part = [&](int p) { return mixers::split_heads(narrow(parts, 2, p * h * d, h * d), h); };
  Tensor reference = fused_attention(part(0), part(1), part(2), mask, 0.3);
  sum(mul(reference, w)).backward();
  CHECK(fused.shape() == Shape{b, h, n, d});
  CHECK(contiguous(fused).to_double_vector() == contiguous(reference).to_double_vector());
  CHECK(packed.grad().to_double_vector() == parts.grad().to_double_vector());
  // A qkv that is not contiguous (a transposed view) is read through a copy, with the same result.
  Tensor transposed = attention_leaf32({b, width, n}, 6);
  Tensor strided = fused_self_attention(transpose(transposed, 1, 2), h, mask, 0.3);
  Tensor copied = fused_self_attention(contiguous(transpose(transposed, 1, 2)), h, mask, 0.3);
  CHECK(contiguous(strided).to_double_vector() == contiguous(copied).to_double_vector());
}

// Long items (at least 32 rows) read their heads' rows out of the stacked [B, N, 3·H·D]
// projection through copies into L1 and write their outputs and gradients through a staging
// buffer, streamed when the rows are whole registers (attention_short_keys.cpp): with heads of 8
// features (streamed with AVX2) and of 12 (a partial register), causal and padded.
TEST_CASE("fused_self_attention: 49 tokens of stacked heads agree with the unfused path") {
  const int64_t b = 2, n = 49, h = 2;
  Tensor mask = mul(reshape(length_mask({49, 40}, n), {b, 1, 1, n}), tril_mask(n, n));
  for (int64_t d : {8, 12}) {
    INFO(d << " features a head");
    const int64_t width = 3 * h * d;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    Tensor w = rand32({b, h, n, d}, 4);
    Tensor fused_qkv = attention_leaf32({b, n, width}, 5);
    Tensor fused = fused_self_attention(fused_qkv, h, mask, scale);
    sum(mul(fused, w)).backward();
    Tensor qkv = attention_leaf32({b, n, width}, 5);  // the same values
    auto part = [&](int p) { return mixers::split_heads(narrow(qkv, 2, p * h * d, h * d), h); };
    Tensor scores = mul(matmul(part(0), transpose(part(1), -1, -2)), scale);
    Tensor unfused = matmul(mixers::masked_softmax(scores, mask), part(2));
    sum(mul(unfused, w)).backward();
    check_close(contiguous(fused).to_double_vector(), contiguous(unfused).to_double_vector(), 2e-6);
    check_close(fused_qkv.grad().to_double_vector(), qkv.grad().to_double_vector(), 2e-5);
  }
}

TEST_CASE("fused_self_attention_groups: the padded batch's values and grads at its real rows") {
  // Sequences of lengths 5, 2, 5, 1 padded to 5, against the same rows grouped by length
  // (1: #3, 2: #1, 5: #0 and #2), causal and not; gradients of sum(out ∘ w) at the real rows.
  const int64_t b = 4, n = 5, h = 2, d = 4, width = 3 * h * d;
  const std::vector<int32_t> lengths{5, 2, 5, 1};
  const std::vector<int64_t> order{3, 1, 0, 2};  // the sequences in the groups' order
  const std::vector<SequenceGroup> groups{{1, 1}, {1, 2}, {2, 5}};
  for (bool causal : {false, true}) {
    INFO(causal);
    Tensor mask = reshape(length_mask(lengths, n), {b, 1, 1, n});
    if (causal) mask = mul(mask, tril_mask(n, n));
    Tensor padded = attention_leaf32({b, n, width}, 7);
    Tensor w = rand32({b, n, h * d}, 8);
    Tensor out_padded = mixers::merge_heads(fused_self_attention(padded, h, mask, 0.4));
    sum(mul(mul(out_padded, w), unsqueeze(length_mask(lengths, n), 2))).backward();
    // The real rows in the groups' order, as a leaf of their own.
    std::vector<float> all = padded.to_float_vector(), rows_data, w_rows;
    std::vector<float> w_all = w.to_float_vector();
    for (int64_t s : order)
      for (int64_t t = 0; t < lengths[s]; ++t) {
        rows_data.insert(rows_data.end(), all.begin() + (s * n + t) * width,
                         all.begin() + (s * n + t + 1) * width);
        w_rows.insert(w_rows.end(), w_all.begin() + (s * n + t) * h * d,
                      w_all.begin() + (s * n + t + 1) * h * d);
      }
    const int64_t r = 13;
    Tensor rows = Tensor::from_data(rows_data, {r, width});
    rows.set_requires_grad(true);
    Tensor out_rows = fused_self_attention_groups(rows, h, groups, causal, 0.4);
    sum(mul(out_rows, Tensor::from_data(w_rows, {r, h * d}))).backward();
    REQUIRE(out_rows.shape() == Shape{r, h * d});
    std::vector<float> got = out_rows.to_float_vector(), grad = rows.grad().to_float_vector();
    std::vector<float> want = contiguous(out_padded).to_float_vector();
    std::vector<float> want_grad = padded.grad().to_float_vector();
    int64_t row = 0;
    for (int64_t s : order)
      for (int64_t t = 0; t < lengths[s]; ++t, ++row) {
        for (int64_t c = 0; c < h * d; ++c)
          CHECK(got[row * h * d + c] ==
                doctest::Approx(want[(s * n + t) * h * d + c]).epsilon(1e-5));
        for (int64_t c = 0; c < width; ++c)
          CHECK(grad[row * width + c] ==
                doctest::Approx(want_grad[(s * n + t) * width + c]).epsilon(1e-4).scale(1e-6));
      }
  }
}

TEST_CASE("fused_self_attention_groups: groups that do not cover qkv are refused") {
  CHECK_THROWS_WITH_AS(fused_self_attention_groups(rand32({7, 12}, 1), 2, {{2, 3}}, false, 1.0),
                       "fused_self_attention_groups: the groups hold 6 rows, qkv [7,12] has 7",
                       Error);
  CHECK_THROWS_WITH_AS(fused_self_attention_groups(rand32({6, 10}, 1), 2, {{2, 3}}, false, 1.0),
                       doctest::Contains("needs qkv [R, 3·H·D] and H > 0 heads, got qkv [6,10]"),
                       Error);
}

TEST_CASE("fused_self_attention: wrong shapes name the op and the shapes") {
  CHECK_THROWS_WITH_AS(fused_self_attention(rand32({2, 3, 20}, 1), 3, Tensor(), 1.0),
                       doctest::Contains("fused_self_attention: needs qkv [B, N, 3·H·D] and H > 0 "
                                         "heads, got qkv [2,3,20] and 3 heads"),
                       Error);
  CHECK_THROWS_WITH_AS(fused_self_attention(rand32({2, 3, 4, 6}, 1), 1, Tensor(), 1.0),
                       doctest::Contains("fused_self_attention: needs qkv [B, N, 3·H·D]"), Error);
  CHECK_THROWS_WITH_AS(fused_self_attention(rand32({2, 3, 12}, 1), 2, tril_mask(3, 4), 1.0),
                       doctest::Contains("fused_self_attention: the mask [3,4] does not broadcast "
                                         "to the scores [B, H, N, M] = [2,2,3,3]"),
                       Error);
}

TEST_CASE("fused_attention: a step's graph frees everything it held once its tensors go") {
  // The graph node of each op keeps what its backward needs; none may keep the op's own result
  // (result -> node -> closure -> result would be a cycle, never freed: a leak every step).
  auto in_use = [] { return cpu::host_memory_stats().bytes_in_use; };
  Tensor mask = tril_mask(7, 7);
  const size_t before = in_use();
  {
    Tensor q = attention_leaf32({2, 2, 7, 8}, 1), k = attention_leaf32({2, 2, 7, 8}, 2),
           v = attention_leaf32({2, 2, 7, 8}, 3);
    sum(fused_attention(q, k, v, mask, 0.3)).backward();
    Tensor packed = attention_leaf32({2, 7, 48}, 5);
    sum(fused_self_attention(packed, 2, mask, 0.3)).backward();
    Tensor kept = fused_self_attention(packed, 2, mask, 0.3);  // a graph never backpropagated
  }
  CHECK(in_use() == before);
}
