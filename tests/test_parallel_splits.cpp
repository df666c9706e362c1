// How the CPU kernels share work between threads: a contiguous elementwise loop (one coalesced
// row) is split by elements, a column sum with few outputs but long columns (a bias gradient) is
// cut into a fixed number of row blocks, and both give the same bits on any thread count; a product
// with a long inner axis is split along it and keeps one thread's values; the pool hands out jobs
// with fewer chunks than threads without running a chunk twice or losing one.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/strided.h"
#include "core/parallel.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// Runs fn with n threads, then restores the thread count the test found.
template <typename F>
void with_threads(int n, const F& fn) {
  int saved = num_threads();
  set_num_threads(n);
  fn();
  set_num_threads(saved);
}

View contiguous_view(float* data, std::vector<int64_t> shape) {
  View v;
  v.data = data;
  v.ndim = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    stride *= shape[d];
  }
  return v;
}

}  // namespace

TEST_CASE(
    "parallel splits: a contiguous elementwise loop runs on both threads, each element once") {
  // [3, 70001] contiguous: the axes coalesce into one row of 210003 elements, which a split by
  // rows left to one thread.
  std::vector<float> data(3 * 70001, 0.0f);
  View v = contiguous_view(data.data(), {3, 70001});
  cpu::StridedLoop<1> loop(v, {&v});
  CHECK(loop.ndim == 1);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  with_threads(2, [&] {
    loop.run([&](auto off, int64_t n, auto st) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        threads.insert(std::this_thread::get_id());
      }
      for (int64_t i = 0; i < n; ++i) data[off[0] + i * st[0]] += 1.0f;
    });
  });
  CHECK(threads.size() == 2);
  CHECK(std::count(data.begin(), data.end(), 1.0f) == static_cast<long>(data.size()));
}

TEST_CASE("parallel splits: a strided loop cut inside rows still visits each element once") {
  // [5, 30001] with the rows transposed in memory: rows do not coalesce, and the element split
  // falls inside a row.
  int64_t rows = 5, cols = 30001;
  std::vector<float> data(rows * cols, 0.0f);
  View v;
  v.data = data.data();
  v.ndim = 2;
  v.shape[0] = rows;
  v.shape[1] = cols;
  v.strides[0] = 1;
  v.strides[1] = rows;
  cpu::StridedLoop<1> loop(v, {&v});
  CHECK(loop.ndim == 2);
  std::atomic<int> runs{0};
  with_threads(2, [&] {
    loop.run([&](auto off, int64_t n, auto st) {
      ++runs;
      for (int64_t i = 0; i < n; ++i) data[off[0] + i * st[0]] += 1.0f;
    });
  });
  CHECK(runs.load() == static_cast<int>(rows) + 1);  // one row is cut in two
  CHECK(std::count(data.begin(), data.end(), 1.0f) == static_cast<long>(data.size()));
}

TEST_CASE(
    "parallel splits: binary, copy and bias-gradient sums give the same bits on 1 and 2 threads") {
  Tensor x = rand32({1536, 256}, 1), y = rand32({1536, 256}, 2), bias = rand32({256}, 3);
  auto compute = [&] {
    std::vector<std::vector<float>> out;
    out.push_back(add(x, y).to_float_vector());
    out.push_back(mul(x, bias).to_float_vector());  // broadcast along rows
    out.push_back(contiguous(transpose(x, 0, 1)).to_float_vector());
    out.push_back(sum(x, {0}).to_float_vector());  // [256] outputs over 1536 rows
    out.push_back(sum(reshape(x, {3, 512, 256}), {1}).to_float_vector());
    return out;
  };
  std::vector<std::vector<float>> one, two;
  with_threads(1, [&] { one = compute(); });
  with_threads(2, [&] { two = compute(); });
  CHECK(one == two);
  // And the sums are right: against float64 on the same data.
  std::vector<double> reference(256, 0.0);
  std::vector<float> xs = x.to_float_vector();
  for (int64_t r = 0; r < 1536; ++r)
    for (int64_t c = 0; c < 256; ++c) reference[c] += xs[r * 256 + c];
  for (int64_t c = 0; c < 256; ++c) CHECK(one[3][c] == doctest::Approx(reference[c]).epsilon(1e-4));
}

TEST_CASE("parallel splits: a bias gradient's column sum is cut into fixed row blocks") {
  // [1, rows, d] summed over rows: 16 blocks of rows, each summed into its own partial row, added
  // in block order. 1,003 rows do not divide into 16 blocks; 1, 2 and 3 threads give one result.
  const int64_t rows = 1003, d = 72;
  Tensor x = rand32({rows, d}, 7);
  std::vector<float> xs = x.to_float_vector();
  std::vector<double> reference(d, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) reference[c] += xs[r * d + c];
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    std::vector<float> got;
    with_threads(threads, [&] { got = sum(x, {0}).to_float_vector(); });
    for (int64_t c = 0; c < d; ++c) CHECK(got[c] == doctest::Approx(reference[c]).epsilon(1e-5));
    if (first.empty()) first = got;
    CHECK(got == first);
  }
  // In float64 the same blocks match the reference to rounding.
  Tensor x64 = rand64({rows, d}, 7);
  std::vector<double> x64s = x64.to_double_vector(), ref64(d, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) ref64[c] += x64s[r * d + c];
  check_close(sum(x64, {0}).to_double_vector(), ref64, 1e-12);
}

TEST_CASE("parallel splits: jobs with fewer chunks than threads run every chunk exactly once") {
  // Two chunks on a pool of four threads: two helpers have nothing to do in each job and may
  // look at it late, after the next job was posted.
  with_threads(4, [&] {
    for (int job = 0; job < 2000; ++job) {
      int64_t n = job % 3 == 0 ? 2 : 4;  // 2- and 4-chunk jobs mixed
      std::vector<std::atomic<int>> hits(n);
      parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[i];
      });
      for (auto& h : hits) REQUIRE(h.load() == 1);
    }
  });
}

TEST_CASE(
    "parallel splits: a product with a long inner axis is split along it, with the values "
    "of one thread") {
  // A weight gradient's shape: C [m, n] small, k (the tokens) long. On 2 or more threads each
  // thread multiplies its slice of k into a partial C; alpha applies to every slice, beta only
  // once, and the partials are added in a fixed order. k is odd so the slices differ in length.
  const int64_t m = 40, n = 56, k = 4099, batch = 2;
  std::vector<double> a(batch * k * m), b(batch * k * n), c0(batch * m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37 * static_cast<double>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11 * static_cast<double>(i));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = 0.01 * static_cast<double>(i % 97);
  auto product = [&](int threads) {
    std::vector<double> c = c0;
    GemmArgs g;
    g.dtype = DType::F64;
    g.trans_a = true;  // A stored [k, m], as activations are: C = Aᵀ B
    g.m = m, g.n = n, g.k = k;
    g.a = a.data(), g.lda = m, g.stride_a = k * m;
    g.b = b.data(), g.ldb = n, g.stride_b = k * n;
    g.c = c.data(), g.ldc = n, g.stride_c = m * n;
    g.batch = batch, g.alpha = 0.5, g.beta = 2.0;
    with_threads(threads, [&] { backend_for(Device::cpu()).gemm(g); });
    return c;
  };
  std::vector<double> expected(c0.size());
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col) {
        double sum = 0;
        for (int64_t j = 0; j < k; ++j)
          sum += a[i * k * m + j * m + r] * b[i * k * n + j * n + col];
        expected[(i * m + r) * n + col] = 0.5 * sum + 2.0 * c0[(i * m + r) * n + col];
      }
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    std::vector<double> c = product(threads);
    check_close(c, expected, 1e-11);
    CHECK(c == product(threads));  // the same bits, run after run
  }
}
