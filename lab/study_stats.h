// The study's statistics, small enough to check by hand: intervals over seeds (Student's t),
// binomial intervals for an accuracy on a test set of known size (Wilson score), and Welch's
// t-test between two mixers' per-seed results, which the report's verdicts rest on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab::lab {

// Two-sided p-value of Student's t distribution with `df` degrees of freedom (df > 0, not
// necessarily whole: Welch's df is not): P(|T| >= |t|).
double student_t_two_sided_p(double t, double df);
// The t with P(|T| >= t) = 0.05: 12.706 for df = 1, 4.303 for 2, 2.776 for 4, 1.960 as df grows.
double student_t_critical_95(double df);

// Mean over seeds with a 95% t-interval: mean ± t(0.975, n-1) · s / sqrt(n). One value has no
// interval (half_width NaN); equal values have a zero-width one.
struct SeedInterval {
  int n = 0;
  double mean = 0, sd = 0, half_width = 0;
};
SeedInterval seed_interval(const std::vector<double>& values);

// The 95% Wilson score interval of a proportion p measured on n trials (n > 0).
struct Bounds {
  double lo = 0, hi = 0;
};
Bounds wilson_interval(double p, int64_t n);

// Welch's t-test of mean(a) - mean(b): the difference, its 95% interval's half-width
// (t(0.975, df) · se, Welch-Satterthwaite df) and the two-sided p-value. Needs at least two
// values on each side (ok = false otherwise). When both sides have zero spread the difference
// is exact: p = 0 if it is non-zero, 1 if it is zero.
struct WelchResult {
  bool ok = false;
  double difference = 0, half_width = 0, p = 1, df = 0;
};
WelchResult welch_test(const std::vector<double>& a, const std::vector<double>& b);

// The verdict on "a is better than b" (higher is better unless `higher_is_better` is false):
// "supported" / "contradicted" when Welch's test is significant at 5% in that / the other
// direction, else "inconclusive (difference d ± ci)"; with fewer than two seeds on a side,
// "inconclusive (one seed: no test)". d and ci are printed with `digits` decimals, as the caller
// prints the numbers compared (three for a metric, none for examples per second).
std::string verdict_better(const std::vector<double>& a, const std::vector<double>& b,
                           bool higher_is_better, int digits = 3);

// Convergence: the improvement of the validation metric over the last 20% of training, from
// a cell's (step, value) evaluations in step order: the mean of the evaluations in the last tenth
// of training (steps in (0.9·last, last]) minus the mean of those in the tenth before the 80%
// mark ((0.7·last, 0.8·last]), so that one lucky or unlucky evaluation does not decide it. With
// no evaluation in that earlier tenth, the last one at or before 80% stands for it. Negated when
// lower is better; NaN when fewer than two evaluations exist or none falls in the first 80%.
double late_improvement(const std::vector<std::pair<int64_t, double>>& evaluations,
                        bool higher_is_better);
// A cell whose late improvement exceeds this (or is unknown) is "not converged".
constexpr double kConvergenceThreshold = 0.01;

}  // namespace mixlab::lab
