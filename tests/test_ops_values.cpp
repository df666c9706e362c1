// Forward values against hand-computed or closed-form results.
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/grad_mode.h"
#include "backends/backend.h"
#include "backends/cpu/caching_allocator.h"
#include "core/dtype_dispatch.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

TEST_CASE("values: softmax rows sum to 1 and log_softmax matches log(softmax)") {
  Tensor x = mul(rand32({4, 7}, 1), 30.0);  // large logits: stability matters
  auto p = softmax(x).to_double_vector();
  for (int r = 0; r < 4; ++r) {
    double s = 0;
    for (int c = 0; c < 7; ++c) s += p[r * 7 + c];
    CHECK(s == doctest::Approx(1.0).epsilon(1e-6));
  }
  auto lp = log_softmax(x).to_double_vector();
  for (size_t i = 0; i < p.size(); ++i)
    CHECK(std::exp(lp[i]) == doctest::Approx(p[i]).epsilon(1e-5));
}

// The float32 softmax rows run in AVX-512 or AVX2 registers where the kernels have them
// (avx512_math.h, avx2_math.h): every length up to 40 covers whole registers and every tail of
// both widths. Against double: logits up to ±2e4 apart, keys at -inf (probability 0), a row of
// one finite key among -inf ones (probability 1), and a NaN, which makes its row NaN (as the
// portable loop does: the maximum skips it, its exp does not).
TEST_CASE("values: softmax rows of every length up to 40 agree with double, -inf and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t cols = 1; cols <= 40; ++cols) {
    INFO(cols << " columns");
    std::vector<float> x = rand32({4, cols}, 300 + cols).to_float_vector();
    for (int64_t c = 0; c < cols; ++c) {
      x[static_cast<size_t>(c)] *= 1e4f;                        // row 0: far apart
      if (c % 3 == 1) x[static_cast<size_t>(cols + c)] = -inf;  // row 1: some keys at -inf
      if (c > 0) x[static_cast<size_t>(2 * cols + c)] = -inf;   // row 2: one finite key
    }
    x[static_cast<size_t>(3 * cols + cols / 2)] = NAN;  // row 3: a NaN
    Tensor p = softmax(Tensor::from_data(x, {4, cols}));
    const std::vector<float> got = p.to_float_vector();
    for (int64_t r = 0; r < 3; ++r) {
      double hi = -INFINITY, total = 0;
      for (int64_t c = 0; c < cols; ++c) hi = std::max(hi, double(x[size_t(r * cols + c)]));
      for (int64_t c = 0; c < cols; ++c) total += std::exp(double(x[size_t(r * cols + c)]) - hi);
      for (int64_t c = 0; c < cols; ++c) {
        const double want = std::exp(double(x[size_t(r * cols + c)]) - hi) / total;
        INFO("row " << r << " column " << c);
        CHECK(std::abs(got[size_t(r * cols + c)] - want) <= 1e-6 + 2e-6 * want);
      }
    }
    for (int64_t c = 0; c < cols; ++c) CHECK(std::isnan(got[size_t(3 * cols + c)]));
  }
}

TEST_CASE("values: relu's gradient passes dy where x > 0 only, a NaN dy stays NaN") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor x = Tensor::from_data(std::vector<double>{-2, -0.0, 0, 1e-30, 3, -1}, {6})
                   .to(dtype)
                   .set_requires_grad();
    Tensor dy = Tensor::from_data(std::vector<double>{5, 6, 7, 8, 9, nan}, {6}).to(dtype);
    relu(x).backward(dy);
    std::vector<double> dx = x.grad().to_double_vector();
    CHECK(dx[0] == 0);  // x < 0
    CHECK(dx[1] == 0);  // -0 and 0 are not above 0
    CHECK(dx[2] == 0);
    CHECK(dx[3] == 8);  // the smallest positive x passes dy whole
    CHECK(dx[4] == 9);
    CHECK(std::isnan(dx[5]));  // NaN · 0, as the product with a step gave
  }
}

TEST_CASE("values: layer_norm output has mean 0 and variance 1") {
  Tensor y = layer_norm(mul(rand64({3, 16}, 2, false), 5.0), Tensor(), Tensor(), 1e-12);
  auto v = y.to_double_vector();
  for (int r = 0; r < 3; ++r) {
    double m = 0, var = 0;
    for (int c = 0; c < 16; ++c) m += v[r * 16 + c] / 16;
    for (int c = 0; c < 16; ++c) var += (v[r * 16 + c] - m) * (v[r * 16 + c] - m) / 16;
    CHECK(std::abs(m) < 1e-12);
    CHECK(var == doctest::Approx(1.0).epsilon(1e-9));
  }
}

TEST_CASE("values: matmul against a naive loop including batched and transposed") {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {3, 5, 2}, {17, 9, 13}}) {
    Tensor a = rand64({2, m, k}, 3, false), b = rand64({2, k, n}, 4, false);
    auto c = matmul(a, b).to_double_vector();
    auto av = a.to_double_vector(), bv = b.to_double_vector();
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p) s += av[(t * m + i) * k + p] * bv[(t * k + p) * n + j];
          CHECK(c[(t * m + i) * n + j] == doctest::Approx(s).epsilon(1e-12));
        }
    // (Bᵀ Aᵀ)ᵀ = A B with both transposes as views.
    auto c2 = transpose(matmul(transpose(b, 1, 2), transpose(a, 1, 2)), 1, 2).to_double_vector();
    check_close(c2, c, 1e-12);
  }
}

using mixlab::cpu::host_memory_stats;
using mixlab::cpu::host_size_class;
using mixlab::cpu::HostMemoryStats;
using mixlab::cpu::reset_host_memory_peaks;

TEST_CASE(
    "values: a linear product reads its transposed weight in place and hands the weight "
    "a contiguous gradient") {
  // y = x Wᵀ with W [out, in]: Wᵀ reaches gemm as a transpose flag, and W's gradient is
  // written as dYᵀ X straight into W's layout. (unsqueeze was a reshape, which copied Wᵀ
  // every step and sent the gradient back transposed, for a transposing copy into .grad.)
  Tensor x = rand64({2, 5, 3}, 26, true), w = rand64({4, 3}, 27, true);
  Tensor wt = transpose(w, 0, 1);
  CHECK(unsqueeze(wt, 0).raw_data() == w.raw_data());  // a view, not a copy
  CHECK(squeeze(unsqueeze(wt, 0), 0).strides() == wt.strides());
  Tensor y = matmul(x, wt);
  check_close(y.to_double_vector(), matmul(x, clone(wt)).to_double_vector(), 1e-12);
  sum(mul(y, y)).backward();
  Tensor gw = w.grad();
  CHECK(gw.is_contiguous());
  // dW = dYᵀ X with dY = 2y, against the product of dense copies.
  NoGradGuard no_grad;
  Tensor dy = reshape(mul(y, 2.0), {10, 4}), xs = reshape(x, {10, 3});
  check_close(gw.to_double_vector(), matmul(clone(transpose(dy, 0, 1)), xs).to_double_vector(),
              1e-12);

  // The effect: the forward takes no memory beyond its output (the old copy of Wᵀ would).
  Tensor big_w = rand64({64, 48}, 28, false), big_x = rand64({6, 48}, 29, false);
  Tensor big_wt = transpose(big_w, 0, 1);
  HostMemoryStats before = host_memory_stats();
  reset_host_memory_peaks();
  Tensor out = matmul(big_x, big_wt);
  size_t taken = host_memory_stats().peak_bytes_in_use - before.bytes_in_use;
  CHECK(taken < host_size_class(sizeof(double) * 6 * 64) + host_size_class(sizeof(double) * 64));
}

TEST_CASE("values: matmul reads head-split views in place, with their dense copies' values") {
  // [B, N, H·D] projections split into heads [B, H, N, D] as the mixers do (mixers::split_heads):
  // rows are H·D apart and heads D apart, so no single batch stride exists; gemm reads them on
  // a two-level grid (GemmArgs::inner) instead of copying them first.
  const int64_t b = 3, n = 5, h = 2, d = 4;
  auto split = [&](const Tensor& x) { return transpose(reshape(x, {b, n, h, d}), 1, 2); };
  Tensor q = split(rand64({b, n, h * d}, 21, false)), k = split(rand64({b, n, h * d}, 22, false));
  Tensor v = split(rand64({b, n, h * d}, 23, false));
  CHECK_FALSE(q.is_contiguous());
  Tensor scores = matmul(q, transpose(k, -1, -2));  // [B, H, N, N]
  check_close(scores.to_double_vector(),
              matmul(clone(q), transpose(clone(k), -1, -2)).to_double_vector(), 1e-12);
  check_close(matmul(scores, v).to_double_vector(), matmul(scores, clone(v)).to_double_vector(),
              1e-12);

  // The effect: the only memory the product takes is its output.
  NoGradGuard no_grad;
  HostMemoryStats before = host_memory_stats();
  reset_host_memory_peaks();
  Tensor again = matmul(q, transpose(k, -1, -2));
  size_t taken = host_memory_stats().peak_bytes_in_use - before.bytes_in_use;
  CHECK(taken < host_size_class(sizeof(double) * b * h * n * n) +
                    host_size_class(sizeof(double) * b * n * h * d));

  // Three batch axes: the outer two nest and fold into one level; a broadcast one (stride 0)
  // and one that does not nest (a transposed pair) agree with dense copies too.
  Tensor x = rand64({2, 3, 4, 5, 6}, 24, false), y = rand64({3, 4, 6, 2}, 25, false);
  check_close(matmul(x, y).to_double_vector(),
              matmul(x, clone(expand(y, {2, 3, 4, 6, 2}))).to_double_vector(), 1e-12);
  Tensor xt = transpose(x, 0, 1);  // [3, 2, 4, 5, 6]: axes 0 and 1 do not nest
  check_close(matmul(xt, narrow(y, 0, 0, 1)).to_double_vector(),
              matmul(clone(xt), clone(narrow(y, 0, 0, 1))).to_double_vector(), 1e-12);
}

TEST_CASE("values: sums over a densely laid out view agree with its contiguous copy") {
  // g [B, H, N, D] as it comes back through merge_heads: memory order B, N, H, D.
  Tensor merged = rand64({3, 5, 2 * 4}, 26, false);
  Tensor g = transpose(reshape(merged, {3, 5, 2, 4}), 1, 2);
  Tensor dense_g = clone(g);
  std::vector<std::vector<int64_t>> cases{{0, 1, 2}, {0, 2}, {3}, {1}, {0, 1}, {1, 3}, {2, 3}, {}};
  for (const auto& axes : cases) {
    INFO("axes " << axes.size());
    check_close(sum(g, axes, true).to_double_vector(), sum(dense_g, axes, true).to_double_vector(),
                1e-12);
  }
  // The effect: a bias gradient's sum (all axes but D, one run in memory) takes no copy.
  NoGradGuard no_grad;
  HostMemoryStats before = host_memory_stats();
  reset_host_memory_peaks();
  Tensor db = sum(g, {0, 1, 2}, false);
  size_t taken = host_memory_stats().peak_bytes_in_use - before.bytes_in_use;
  CHECK(taken < host_size_class(sizeof(double) * g.numel()));
  CHECK(db.shape() == Shape{4});
}

TEST_CASE("values: FFT of known signals") {
  // A unit impulse transforms to all ones; a pure cosine to two spikes of n/2.
  const int n = 8;
  std::vector<double> impulse(n * 2, 0.0), wave(n * 2, 0.0);
  impulse[0] = 1;
  for (int t = 0; t < n; ++t) wave[t * 2] = std::cos(2 * M_PI * 2 * t / n);
  auto f = fft(Tensor::from_data(impulse, {n, 2}), 0).to_double_vector();
  for (int k = 0; k < n; ++k) {
    CHECK(f[k * 2] == doctest::Approx(1.0));
    CHECK(f[k * 2 + 1] == doctest::Approx(0.0));
  }
  auto w = fft(Tensor::from_data(wave, {n, 2}), 0).to_double_vector();
  for (int k = 0; k < n; ++k) {
    double expect = (k == 2 || k == n - 2) ? n / 2.0 : 0.0;
    CHECK(std::abs(w[k * 2] - expect) < 1e-12);
    CHECK(std::abs(w[k * 2 + 1]) < 1e-12);
  }
  // Unnormalised inverse after forward gives n times the input.
  Tensor x = rand64({5, 3, 2}, 5, false);
  auto back = fft(fft(x, 0), 0, true).to_double_vector();
  auto orig = x.to_double_vector();
  for (size_t i = 0; i < orig.size(); ++i) CHECK(back[i] == doctest::Approx(5 * orig[i]));
}

// fft2_real of x [batch, n, d] against the definition, C X C - S X S summed in double.
void check_fft2_real_definition(const Tensor& x, const std::vector<int32_t>& lens, double eps) {
  const int64_t batch = x.size(0), n = x.size(1), d = x.size(2);
  auto xv = x.to_double_vector();
  Tensor lengths = lens.empty() ? Tensor() : Tensor::from_data(lens, {batch});
  auto y = fft2_real(x, lengths).to_double_vector();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t L = lens.empty() ? n : lens[b];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < d; ++k) {
        double s = 0, size = 0;
        if (j < L)
          for (int64_t p = 0; p < L; ++p)
            for (int64_t q = 0; q < d; ++q) {
              double term = xv[(b * n + p) * d + q] *
                            std::cos(2 * M_PI * (double(j * p % L) / L + double(k * q % d) / d));
              s += term;
              size += std::abs(term);
            }
        INFO("item " << b << " of " << batch << ", [" << j << ", " << k << "] of " << n << " x "
                     << d << (lens.empty() ? "" : ", length ") << L);
        CHECK(std::abs(y[(b * n + j) * d + k] - s) <= eps * (1 + size));
      }
  }
}

TEST_CASE("values: fft2_real equals C X C - S X S with per-item lengths") {
  check_fft2_real_definition(rand64({2, 5, 6}, 6, false), {3, 5}, 1e-12);
}

TEST_CASE("values: fft2_real equals its definition in groups of items, tails and padding") {
  // Unpadded items go in groups (rows by FFTW, the token axis as products with C and S);
  // 37 items leave a short last group, odd and even d differ in their last column, n = 1
  // and d = 1 are the degenerate transforms, and one padded item sends its group the
  // per-item way while the other groups stay whole.
  for (std::pair<int64_t, int64_t> shape :
       {std::pair<int64_t, int64_t>{7, 10}, {7, 9}, {1, 6}, {5, 1}, {49, 16}}) {
    const int64_t n = shape.first, d = shape.second;  // (clang 14 captures no structured binding)
    CAPTURE(n);
    CAPTURE(d);
    check_fft2_real_definition(rand64({37, n, d}, 60 + n + d, false), {}, 1e-12);
    check_fft2_real_definition(rand32({37, n, d}, 70 + n + d), {}, 2e-6);
    std::vector<int32_t> lens(37, static_cast<int32_t>(n));
    lens[20] = static_cast<int32_t>((n + 1) / 2);
    check_fft2_real_definition(rand64({37, n, d}, 80 + n + d, false), lens, 1e-12);
  }
}

TEST_CASE("values: broadcasting reductions and views") {
  Tensor a = Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_data(std::vector<float>{10, 20, 30}, {3});
  CHECK((a + b).to_float_vector() == std::vector<float>{11, 22, 33, 14, 25, 36});
  CHECK(sum(a, {0}).to_float_vector() == std::vector<float>{5, 7, 9});
  CHECK(sum(a, {1}).to_float_vector() == std::vector<float>{6, 15});
  CHECK(max(a, {1}).to_float_vector() == std::vector<float>{3, 6});
  CHECK(mean(a).item() == doctest::Approx(3.5));
  CHECK(transpose(a, 0, 1).contiguous().to_float_vector() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(narrow(a, 1, 1, 2).contiguous().to_float_vector() == std::vector<float>{2, 3, 5, 6});
  Tensor t = transpose(a, 0, 1);
  CHECK(!t.is_contiguous());
  CHECK(t.impl().storage == a.impl().storage);  // a view, no copy
  CHECK(reshape(a, {3, 2}).impl().storage == a.impl().storage);
  CHECK(tril_mask(3, 3).to_float_vector() == std::vector<float>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  CHECK(length_mask({2, 3}, 3).to_float_vector() == std::vector<float>{1, 1, 0, 1, 1, 1});
}

TEST_CASE("values: cross_entropy equals -log softmax at the target - smoothing formula") {
  Tensor z = Tensor::from_data(std::vector<double>{1.0, 2.0, 0.5, -1.0, 0.0, 3.0}, {2, 3});
  Tensor t = Tensor::from_data(std::vector<int32_t>{1, 2}, {2});
  auto lp = log_softmax(z).to_double_vector();
  double expect = -(lp[1] + lp[5]) / 2;
  CHECK(cross_entropy(z, t).item() == doctest::Approx(expect).epsilon(1e-12));
  double eps = 0.2;
  double smooth = 0;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      double q = (c == (r == 0 ? 1 : 2) ? 1 - eps : 0) + eps / 3;
      smooth -= q * lp[r * 3 + c] / 2;
    }
  CHECK(cross_entropy(z, t, -100, eps).item() == doctest::Approx(smooth).epsilon(1e-12));
  Tensor ignored = Tensor::from_data(std::vector<int32_t>{-100, -100}, {2});
  CHECK(cross_entropy(z, ignored).item() == 0.0);
}

TEST_CASE("values: dropout keeps expectation and is seeded") {
  Tensor x = Tensor::ones({10000});
  auto a = dropout(x, 0.25, true, 7).to_float_vector();
  auto b = dropout(x, 0.25, true, 7).to_float_vector();
  CHECK(a == b);
  double m = 0;
  int zeros = 0;
  for (float v : a) {
    m += v / a.size();
    zeros += v == 0;
  }
  CHECK(m == doctest::Approx(1.0).epsilon(0.03));
  CHECK(zeros == doctest::Approx(2500).epsilon(0.1));
  CHECK(dropout(x, 0.25, false, 7).same_as(x));
}

TEST_CASE("values: printing shows shape dtype device and abbreviates") {
  std::string s = Tensor::arange(100).str();
  CHECK(s.find("shape=[100]") != std::string::npos);
  CHECK(s.find("float32") != std::string::npos);
  CHECK(s.find("cpu") != std::string::npos);
  CHECK(s.find("...") != std::string::npos);
}

TEST_CASE("values: float32 exp and erf kernels agree with libm to float precision") {
  std::vector<float> xs;
  for (float x = -9.0f; x <= 9.0f; x += 0.001f) xs.push_back(x);
  Tensor t = Tensor::from_data(xs, {static_cast<int64_t>(xs.size())});
  auto e = exp(t).to_float_vector();
  auto g = gelu(t).to_float_vector();
  double worst_exp = 0, worst_gelu = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    worst_exp = std::max(worst_exp, std::abs(e[i] / std::exp(x) - 1));
    worst_gelu =
        std::max(worst_gelu, std::abs(g[i] - 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))));
  }
  CHECK(worst_exp < 1e-6);
  CHECK(worst_gelu < 5e-6);
}

// The fused kernels' GELU rows (bias_act, bias_gelu_backward, gemm_epilogue: epilogue_row.h,
// in AVX-512 or AVX2 registers where the build has them) against erf and exp in double, rows long
// enough for full vectors and a partial last one, and the values at the edges.
TEST_CASE("values: fused GELU and its gradient in float32 agree with libm, NaN and ±inf") {
  std::vector<float> xs;
  for (float x = -12.0f; x <= 12.0f; x += 0.0007f) xs.push_back(x);
  const std::vector<float> edges{NAN,     INFINITY, -INFINITY, 0.0f,  -0.0f,       1e-30f,
                                 -1e-30f, -100.0f,  100.0f,    -1e6f, -5.6568542f, 5.6568542f};
  xs.insert(xs.end(), edges.begin(), edges.end());
  const int64_t cols = 37, rows = (static_cast<int64_t>(xs.size()) + cols - 1) / cols;
  xs.resize(rows * cols, 0.5f);
  Backend& cpu = backend_for(Device::cpu());
  Tensor pre = Tensor::from_data(xs, {rows, cols});
  Tensor zero = Tensor::zeros({cols}, DType::F32, Device::cpu());
  Tensor ones = Tensor::ones({rows, cols}, DType::F32, Device::cpu());
  Tensor same = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
  Tensor y = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
  Tensor dx = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
  Tensor db = Tensor::empty({cols}, DType::F32, Device::cpu());
  cpu.bias_act(pre.view(), zero.view(), same.view(), y.view(), rows, cols);
  cpu.bias_gelu_backward(ones.view(), pre.view(), dx.view(), db.view(), rows, cols);
  auto gv = y.to_float_vector(), dv = dx.to_float_vector();
  double worst_gelu = 0, worst_grad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    INFO("x = " << x << ": gelu " << gv[i] << ", gelu' " << dv[i]);
    if (std::isnan(x)) {
      CHECK(std::isnan(gv[i]));
      CHECK(std::isnan(dv[i]));
      continue;
    }
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double pdf_term = std::isinf(x) ? 0.0 : x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    CHECK(std::abs(dv[i] - (cdf + pdf_term)) < 1e-6);
    worst_grad = std::max(worst_grad, std::abs(dv[i] - (cdf + pdf_term)));
    if (x == INFINITY) CHECK(gv[i] == INFINITY);
    if (std::isinf(x)) continue;  // gelu(-inf) = -inf · 0: NaN, as the unfused op gives
    const double want = x * cdf;
    CHECK(std::abs(gv[i] - want) <= 2e-6 + 1e-6 * std::abs(want));
    // No tail of -x·ε in the far left: an erf form that saturates at 1 - 6e-8 instead of 1
    // leaves -x·4e-9 there, while the true gelu is -5.9e-9 at -6 and falls fast (the AVX-512
    // form follows it, the others clamp erf to -1 and give 0).
    if (x < -6) CHECK(std::abs(gv[i]) <= 1e-8);
    worst_gelu = std::max(worst_gelu, std::abs(gv[i] - want) / (1 + std::abs(want)));
  }
  MESSAGE("worst |error|: gelu " << worst_gelu << ", gelu' " << worst_grad);
}

TEST_CASE("values: unary kernels in float32 (GELU, elu + 1 and their gradients) agree with libm") {
  // The unary kernel, whose float32 rows run in AVX-512 registers where built with it, on a
  // sweep and the edges (odd counts leave a partial last register), against double libm.
  std::vector<float> xs;
  for (float x = -110.0f; x <= 12.0f; x += 0.0031f) xs.push_back(x);
  const std::vector<float> edges{NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f, -1e-30f, 1e30f};
  xs.insert(xs.end(), edges.begin(), edges.end());
  Tensor x = Tensor::from_data(xs, {static_cast<int64_t>(xs.size())});
  Backend& cpu = backend_for(Device::cpu());
  auto run = [&](UnaryOp op) {
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::cpu());
    cpu.unary(op, x.view(), y.view(), 0.0);
    return y.to_float_vector();
  };
  const auto gelu = run(UnaryOp::GeluErf), gelu_grad = run(UnaryOp::GeluErfGrad);
  const auto elu = run(UnaryOp::EluPlusOne), elu_grad = run(UnaryOp::EluPlusOneGrad);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    INFO("x = " << v << ": gelu " << gelu[i] << ", gelu' " << gelu_grad[i] << ", elu+1 " << elu[i]
                << ", its gradient " << elu_grad[i]);
    if (std::isnan(v)) {  // the formulas' selects: NaN is neither above nor below 0
      CHECK(std::isnan(gelu[i]));
      CHECK(std::isnan(gelu_grad[i]));
      CHECK(elu[i] == 1.0f);
      CHECK(elu_grad[i] == 1.0f);
      continue;
    }
    const double elu_want = v > 0 ? v + 1 : std::exp(v), grad_want = v > 0 ? 1.0 : std::exp(v);
    if (std::isinf(elu_want))
      CHECK(elu[i] == elu_want);
    else
      CHECK(std::abs(elu[i] - elu_want) <= 1e-6 * std::max(1.0, std::abs(elu_want)));
    CHECK(std::abs(elu_grad[i] - grad_want) <= 1e-6);
    if (v < -104) CHECK(elu[i] == 0.0f);  // exp underflows to exactly 0, -inf included
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double pdf_term = std::isinf(v) ? 0.0 : v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    CHECK(std::abs(gelu_grad[i] - (cdf + pdf_term)) < 1e-6);
    if (!std::isinf(v)) CHECK(std::abs(gelu[i] - v * cdf) <= 2e-6 + 1e-6 * std::abs(v * cdf));
  }
}

TEST_CASE("values: the GLU kernels in float32 agree with a · σ(b) in double, edges included") {
  // Rows of 2 · 37 (a partial last register); b sweeps ±110 and the edges, a = 1.5.
  std::vector<float> gates;
  for (float b = -110.0f; b <= 110.0f; b += 0.037f) gates.push_back(b);
  for (float b : {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 88.5f, -88.5f}) gates.push_back(b);
  const int64_t cols = 37, rows = (static_cast<int64_t>(gates.size()) + cols - 1) / cols;
  gates.resize(static_cast<size_t>(rows * cols), 0.25f);
  std::vector<float> x(static_cast<size_t>(rows * 2 * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      x[r * 2 * cols + c] = 1.5f;
      x[r * 2 * cols + cols + c] = gates[r * cols + c];
    }
  Tensor in = Tensor::from_data(x, {rows, 2 * cols});
  Tensor y = Tensor::empty({rows, cols}, DType::F32, Device::cpu());
  Tensor dy = Tensor::ones({rows, cols}, DType::F32, Device::cpu());
  Tensor dx = Tensor::empty({rows, 2 * cols}, DType::F32, Device::cpu());
  Backend& cpu = backend_for(Device::cpu());
  cpu.glu(in.view(), y.view(), rows, cols);
  cpu.glu_backward(dy.view(), in.view(), dx.view(), rows, cols);
  const auto out = y.to_float_vector(), grad = dx.to_float_vector();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double b = gates[r * cols + c];
      const float got = out[r * cols + c], da = grad[r * 2 * cols + c],
                  db = grad[r * 2 * cols + cols + c];
      INFO("b = " << b << ": glu " << got << ", da " << da << ", db " << db);
      if (std::isnan(b)) {
        CHECK(std::isnan(got));
        continue;
      }
      const double s = 1.0 / (1.0 + std::exp(-b));
      CHECK(std::abs(got - 1.5 * s) <= 1e-6 * (1 + 1.5 * s));
      CHECK(std::abs(da - s) <= 1e-6);
      CHECK(std::abs(db - 1.5 * s * (1 - s)) <= 1e-6);
    }
}

TEST_CASE("values: the fused ops' graphs free everything once their tensors go") {
  // Each node keeps what its backward needs; a node that kept its op's own result would make a
  // cycle (result -> node -> closure -> result) and leak every step. Forward and backward of
  // each fused op in a scope, then host memory in use is back where it was.
  auto in_use = [] { return cpu::host_memory_stats().bytes_in_use; };
  auto leaf = [](const Shape& shape, uint64_t seed) {
    Tensor t = rand32(shape, seed);
    t.set_requires_grad(true);
    return t;
  };
  const size_t before = in_use();
  {
    Tensor x = leaf({6, 8}, 1), w1 = leaf({12, 8}, 2), b1 = leaf({12}, 3), w2 = leaf({8, 12}, 4),
           b2 = leaf({8}, 5);
    sum(feed_forward(x, w1, b1, w2, b2)).backward();
    sum(linear(x, w1, b1)).backward();
    sum(linear_gelu(x, w1, b1)).backward();
    sum(glu(x)).backward();
    Tensor positive = add(mul(leaf({3, 4, 5}, 6), 0.1), 1.0);
    sum(sum_normalize(positive, 1, 1e-3)).backward();
    sum(scale_shift(x, leaf({8}, 7), leaf({8}, 8))).backward();
    Tensor kept = glu(x);  // a graph never backpropagated
  }
  CHECK(in_use() == before);
}

TEST_CASE("values: dtype dispatch picks the C++ type and names the kernel it refuses") {
  size_t sizes = 0;
  for (DType dtype : {DType::F32, DType::F64, DType::I32})
    dispatch_all(dtype, [&](auto tag) { sizes = sizes * 10 + sizeof(tag); });
  CHECK(sizes == 484);
  dispatch_floating(DType::F64, "softmax", [&](auto tag) { CHECK(sizeof(tag) == 8); });
  CHECK_THROWS_WITH_AS(dispatch_floating(DType::I32, "softmax", [](auto) {}),
                       "softmax: unsupported dtype int32 (float32 or float64 expected)", Error);
}

TEST_CASE("values: sums over axes in several runs are taken run by run, without copying x") {
  // [B, N, h] summed over B and h (a bias broadcast along N gets this gradient), and a 4-D case
  // with three runs; sum and max against loops over the elements.
  Tensor x = rand64({6, 5, 7}, 41, false);
  std::vector<double> xs = x.to_double_vector();
  std::vector<double> sums(5, 0.0), maxes(5, -1e300);
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t n = 0; n < 5; ++n)
      for (int64_t i = 0; i < 7; ++i) {
        double v = xs[(b * 5 + n) * 7 + i];
        sums[n] += v;
        maxes[n] = std::max(maxes[n], v);
      }
  Tensor s = sum(x, {0, 2});
  CHECK(s.shape() == Shape{5});
  check_close(s.to_double_vector(), sums, 1e-12);
  check_close(max(x, {0, 2}).to_double_vector(), maxes, 0.0);
  CHECK(sum(x, {0, 2}, true).shape() == Shape{1, 5, 1});

  Tensor y = rand64({3, 4, 5, 6}, 42, false);  // axes 0, 2 and 3: runs {0} and {2, 3}
  std::vector<double> ys = y.to_double_vector(), per(4, 0.0);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t i = 0; i < 30; ++i) per[c] += ys[(a * 4 + c) * 30 + i];
  check_close(sum(y, {0, 2, 3}).to_double_vector(), per, 1e-12);

  // The effect: no transposing copy of x. The old path took all of x's size again; now only
  // the first run's small result and the output.
  Tensor big = rand32({64, 49, 256}, 43);
  HostMemoryStats before = host_memory_stats();
  reset_host_memory_peaks();
  Tensor b = sum(big, {0, 2});
  size_t taken = host_memory_stats().peak_bytes_in_use - before.bytes_in_use;
  CHECK(taken < host_size_class(sizeof(float) * 64 * 49) + 2 * host_size_class(sizeof(float) * 49));
}
