// The worker pool: kernels split over two threads agree with one thread, and repeated runs on
// the same thread count are bit-identical.
#include "core/parallel.h"
#include "core/pool_spin.h"
#include "tests/test_helpers.h"

using namespace mixlab;
using namespace mixlab::testing;

namespace {

// A mix of kernels on inputs large enough to be split across threads.
std::vector<float> workload() {
  Tensor x = rand32({64, 300, 40}, 1);
  Tensor w = rand32({40, 40}, 2);
  Tensor gamma = rand32({40}, 3);
  Tensor y = layer_norm(gelu(matmul(x, w)), gamma, Tensor());
  Tensor s = softmax(transpose(y, 1, 2), -1);
  Tensor total = sum(mul(s, s));
  Tensor per_row = sum(y, {0, 1});
  std::vector<float> out = s.to_float_vector();
  auto extra = per_row.to_float_vector();
  out.insert(out.end(), extra.begin(), extra.end());
  out.push_back(static_cast<float>(total.item()));
  out.push_back(static_cast<float>(sum(Tensor::ones({200000})).item()));
  return out;
}

}  // namespace

TEST_CASE("parallel: two threads agree with one thread and repeat bit for bit") {
  int saved = num_threads();
  set_num_threads(1);
  auto one = workload();
  set_num_threads(2);
  auto two = workload();
  auto again = workload();
  set_num_threads(saved);
  REQUIRE(one.size() == two.size());
  CHECK(two == again);
  double worst = 0;
  for (size_t i = 0; i < one.size(); ++i)
    worst = std::max(worst, std::abs(double(one[i]) - two[i]) / (1 + std::abs(double(one[i]))));
  CHECK(worst < 1e-5);
}

TEST_CASE("parallel: parallel_for covers every index exactly once") {
  int saved = num_threads();
  set_num_threads(2);
  std::vector<int> hits(100003, 0);
  parallel_for(static_cast<int64_t>(hits.size()), 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i] += 1;
  });
  set_num_threads(saved);
  CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<long>(hits.size()));
}

TEST_CASE("parallel: helpers spin between jobs only while no more threads are runnable than CPUs") {
  using namespace mixlab::pool_spin;
  // /proc/loadavg's fourth field is "runnable/total".
  CHECK(runnable_threads("0.61 0.55 0.48 2/171 4242\n") == 2);
  CHECK(runnable_threads("12.00 9.50 7.25 17/1024 99") == 17);
  CHECK(runnable_threads("") == -1);
  CHECK(runnable_threads("0.61 0.55 0.48") == -1);
  CHECK(runnable_threads("0.61 0.55 0.48 x/171 1") == -1);
  CHECK(runnable_threads("0.61 0.55 0.48 /171 1") == -1);
  CHECK(runnable_threads("0.61 0.55 0.48 2x/171 1") == -1);  // the whole field, not its start
  // The rule: the reading thread and the pool's running threads are in the count, so 2 on a
  // 2-core machine is quiet and a third runnable thread is not; an unreadable count never spins.
  CHECK(quiet(1, 2));
  CHECK(quiet(2, 2));
  CHECK_FALSE(quiet(3, 2));
  CHECK_FALSE(quiet(-1, 2));
  // The pool still hands out every chunk exactly once with spinning helpers.
  int saved = num_threads();
  set_num_threads(2);
  for (int job = 0; job < 500; ++job) {
    std::vector<int> hits(4, 0);
    parallel_for(4, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
    REQUIRE(hits == std::vector<int>(4, 1));
  }
  set_num_threads(saved);
}
