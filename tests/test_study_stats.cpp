// The study's statistics (lab/study_stats.h) on fixed numbers, against textbook answers: the
// expected values below come from printed t tables and the interval formulas worked by hand,
// not from the code under test.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lab/study_stats.h"

using namespace mixlab::lab;

TEST_CASE("study stats: t critical values and p-values match the t table") {
  // Two-sided 95% (t 0.975) from a printed table.
  const std::pair<double, double> table[] = {{1, 12.706}, {2, 4.303},  {3, 3.182},  {4, 2.776},
                                             {5, 2.571},  {10, 2.228}, {30, 2.042}, {1e6, 1.960}};
  for (const auto& row : table) {
    const double df = row.first, t = row.second;  // not structured bindings: INFO captures them
    INFO("df = " << df);
    CHECK(student_t_critical_95(df) == doctest::Approx(t).epsilon(2e-4));
    CHECK(student_t_two_sided_p(t, df) == doctest::Approx(0.05).epsilon(2e-3));
  }
  CHECK(student_t_two_sided_p(0, 4) == doctest::Approx(1.0));
  // t = 4.604 is the 99% point for df = 4.
  CHECK(student_t_two_sided_p(4.604, 4) == doctest::Approx(0.01).epsilon(2e-3));
}

TEST_CASE("study stats: the t-interval over seeds, a duplicated seed is zero-width only if equal") {
  const SeedInterval s = seed_interval({0.80, 0.82, 0.84});
  CHECK(s.n == 3);
  CHECK(s.mean == doctest::Approx(0.82));
  CHECK(s.sd == doctest::Approx(0.02));
  CHECK(s.half_width == doctest::Approx(4.303 * 0.02 / std::sqrt(3.0)).epsilon(1e-3));

  CHECK(seed_interval({0.5, 0.5}).half_width == 0.0);  // the same seed twice: same numbers
  const SeedInterval differ = seed_interval({0.5, 0.52});
  CHECK(differ.half_width == doctest::Approx(12.706 * 0.01).epsilon(1e-3));  // sd 0.01414, n 2
  CHECK(std::isnan(seed_interval({0.7}).half_width));  // one seed: no interval
}

TEST_CASE("study stats: Wilson intervals") {
  const Bounds b = wilson_interval(0.5, 100);  // 50 of 100: [0.4038, 0.5962]
  CHECK(b.lo == doctest::Approx(0.4038).epsilon(1e-3));
  CHECK(b.hi == doctest::Approx(0.5962).epsilon(1e-3));
  const Bounds zero = wilson_interval(0.0, 20);  // 0 of 20: [0, 0.1611]
  CHECK(zero.lo == doctest::Approx(0.0).epsilon(1e-9));
  CHECK(zero.hi == doctest::Approx(0.1611).epsilon(1e-3));
  // A length bin of 1,100 expressions: at most ±0.03 at any accuracy (widest at 0.5).
  const Bounds bin = wilson_interval(0.5, 1100);
  CHECK(0.5 * (bin.hi - bin.lo) <= 0.03);
}

TEST_CASE("study stats: Welch's test gives supported, contradicted and inconclusive") {
  // sd 0.01 on both sides, n = 3: se = sqrt(2 · 0.0001 / 3), df = 4 exactly.
  const std::vector<double> a{0.90, 0.92, 0.91}, b{0.80, 0.82, 0.81};
  const WelchResult w = welch_test(a, b);
  REQUIRE(w.ok);
  const double se = std::sqrt(2 * 0.0001 / 3);
  CHECK(w.difference == doctest::Approx(0.10));
  CHECK(w.df == doctest::Approx(4.0));
  CHECK(w.half_width == doctest::Approx(2.776 * se).epsilon(1e-3));
  CHECK(w.p < 0.001);  // t = 12.2 against 8.610, the 99.9% point for df = 4
  CHECK(verdict_better(a, b, true) == "supported");
  CHECK(verdict_better(b, a, true) == "contradicted");
  CHECK(verdict_better(a, b, false) == "contradicted");  // a word error rate: lower is better

  // Means 0.850 and 0.8467 with sd 0.01 and 0.0208: far inside the noise.
  const std::vector<double> c{0.84, 0.86, 0.85}, d{0.83, 0.87, 0.84};
  const WelchResult n = welch_test(c, d);
  CHECK(n.p > 0.5);
  const std::string v = verdict_better(c, d, true);
  CHECK(v.rfind("inconclusive (difference 0.003 ± ", 0) == 0);
  // The same spread in examples per second, printed as whole numbers as the caller asks.
  auto scaled = [](std::vector<double> x) {
    for (double& e : x) e *= 10000;
    return x;
  };
  CHECK(verdict_better(scaled(c), scaled(d), true, 0).rfind("inconclusive (difference 33 ± ", 0) ==
        0);
  // The interval's half-width lies between t(3) · se and t(2) · se (Welch's df is 2.88).
  const double se_cd = std::sqrt(0.0001 / 3 + 0.00043333 / 3);
  CHECK(n.df == doctest::Approx(2.876).epsilon(2e-3));
  CHECK(n.half_width > 3.182 * se_cd);
  CHECK(n.half_width < 4.303 * se_cd);

  CHECK(verdict_better({0.9}, {0.8, 0.81}, true) == "inconclusive (one seed: no test)");
  // No spread on either side: an exact difference, or none.
  CHECK(verdict_better({0.5, 0.5}, {0.4, 0.4}, true) == "supported");
  CHECK(verdict_better({0.5, 0.5}, {0.5, 0.5}, true) == "inconclusive (difference 0.000 ± 0.000)");
}

TEST_CASE("study stats: late improvement marks a cell not converged") {
  const std::vector<std::pair<int64_t, double>> rising{
      {100, 0.5}, {200, 0.6}, {300, 0.7}, {400, 0.8}, {500, 0.82}};
  CHECK(late_improvement(rising, true) == doctest::Approx(0.02));  // 0.82 - 0.80 (step 400)
  CHECK(late_improvement(rising, true) > kConvergenceThreshold);
  const std::vector<std::pair<int64_t, double>> flat{{100, 0.5}, {400, 0.80}, {500, 0.805}};
  CHECK(late_improvement(flat, true) <= kConvergenceThreshold);
  // Lower is better (a word error rate falling by 0.03 is an improvement of 0.03).
  CHECK(late_improvement({{100, 0.40}, {400, 0.30}, {500, 0.27}}, false) == doctest::Approx(0.03));
  CHECK(std::isnan(late_improvement({{500, 0.8}}, true)));
  // Evaluations every 25 steps at 0.40 with one lucky last one (0.42): the windows' means,
  // 0.405 over 925-1000 against 0.40 over 725-800, not 0.42 against 0.40.
  std::vector<std::pair<int64_t, double>> level;
  for (int64_t step = 25; step <= 1000; step += 25) level.push_back({step, 0.40});
  level.back().second = 0.42;
  CHECK(late_improvement(level, true) == doctest::Approx(0.005));
  CHECK(late_improvement(level, true) <= kConvergenceThreshold);
  // A curve still rising by 0.02 per tenth of training is not converged: 0.04 between the
  // windows' centres, 75% and 95%.
  std::vector<std::pair<int64_t, double>> climbing;
  for (int64_t step = 25; step <= 1000; step += 25) climbing.push_back({step, 0.2 * step / 1000.0});
  CHECK(late_improvement(climbing, true) == doctest::Approx(0.04));
}
