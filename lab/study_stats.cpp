#include "lab/study_stats.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace mixlab::lab {

namespace {

// The continued fraction of the regularised incomplete beta function I_x(a, b), evaluated with
// the modified Lentz method (converges for x < (a + 1) / (a + b + 2)).
double beta_fraction(double a, double b, double x) {
  const double tiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::abs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    // Even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)).
    double num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 + num * d, c = 1 + num / c;
    d = 1 / (std::abs(d) < tiny ? tiny : d), c = std::abs(c) < tiny ? tiny : c;
    h *= d * c;
    // Odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
    num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 + num * d, c = 1 + num / c;
    d = 1 / (std::abs(d) < tiny ? tiny : d), c = std::abs(c) < tiny ? tiny : c;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1) < 1e-15) break;
  }
  return h;
}

// I_x(a, b) = x^a (1-x)^b / (a B(a, b)) · fraction, using the symmetry I_x(a,b) = 1 - I_{1-x}(b,a)
// where the fraction converges slowly.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * beta_fraction(a, b, x) / a;
  return 1 - std::exp(log_front) * beta_fraction(b, a, 1 - x) / b;
}

}  // namespace

double student_t_two_sided_p(double t, double df) {
  if (!std::isfinite(t)) return 0;
  // P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2).
  return incomplete_beta(df / 2, 0.5, df / (df + t * t));
}

double student_t_critical_95(double df) {
  double lo = 0, hi = 1e4;  // p falls from 1 at t = 0
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_two_sided_p(mid, df) > 0.05 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

SeedInterval seed_interval(const std::vector<double>& values) {
  SeedInterval s;
  s.n = static_cast<int>(values.size());
  if (s.n == 0) {
    s.mean = s.sd = s.half_width = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / s.n;
  if (s.n < 2) {
    s.sd = s.half_width = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  double ss = 0;
  for (double v : values) ss += (v - s.mean) * (v - s.mean);
  s.sd = std::sqrt(ss / (s.n - 1));
  s.half_width = student_t_critical_95(s.n - 1) * s.sd / std::sqrt(static_cast<double>(s.n));
  return s;
}

Bounds wilson_interval(double p, int64_t n) {
  const double z = 1.959963984540054, nn = static_cast<double>(n);
  const double centre = (p + z * z / (2 * nn)) / (1 + z * z / nn);
  const double half = z / (1 + z * z / nn) * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn));
  return {centre - half, centre + half};
}

WelchResult welch_test(const std::vector<double>& a, const std::vector<double>& b) {
  WelchResult r;
  if (a.size() < 2 || b.size() < 2) return r;
  const SeedInterval sa = seed_interval(a), sb = seed_interval(b);
  r.ok = true;
  r.difference = sa.mean - sb.mean;
  const double va = sa.sd * sa.sd / sa.n, vb = sb.sd * sb.sd / sb.n, se = std::sqrt(va + vb);
  if (se == 0) {
    r.p = r.difference == 0 ? 1.0 : 0.0;
    r.df = sa.n + sb.n - 2;
    return r;
  }
  r.df = (va + vb) * (va + vb) / (va * va / (sa.n - 1) + vb * vb / (sb.n - 1));
  r.p = student_t_two_sided_p(r.difference / se, r.df);
  r.half_width = student_t_critical_95(r.df) * se;
  return r;
}

std::string verdict_better(const std::vector<double>& a, const std::vector<double>& b,
                           bool higher_is_better, int digits) {
  const WelchResult w = welch_test(a, b);
  if (!w.ok) return "inconclusive (one seed: no test)";
  const double d = higher_is_better ? w.difference : -w.difference;
  if (w.p < 0.05) return d > 0 ? "supported" : "contradicted";
  char buf[96];
  std::snprintf(buf, sizeof buf, "inconclusive (difference %.*f ± %.*f)", digits, d, digits,
                w.half_width);
  return buf;
}

double late_improvement(const std::vector<std::pair<int64_t, double>>& evaluations,
                        bool higher_is_better) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (evaluations.size() < 2) return nan;
  const double last = static_cast<double>(evaluations.back().first);
  // The mean of the evaluations whose step lies in (from·last, to·last]; NaN when there is none.
  auto window_mean = [&](double from, double to) {
    double sum = 0;
    int count = 0;
    for (const auto& [step, value] : evaluations) {
      const double s = static_cast<double>(step);
      if (s > from * last && s <= to * last) sum += value, ++count;
    }
    return count ? sum / count : nan;
  };
  const double late = window_mean(0.9, 1.0);  // holds the last evaluation
  double at_cut = window_mean(0.7, 0.8);
  if (std::isnan(at_cut)) {  // sparse evaluations: the last one at or before 80%
    const std::pair<int64_t, double>* before = nullptr;
    for (const auto& e : evaluations)
      if (static_cast<double>(e.first) <= 0.8 * last) before = &e;
    if (before == nullptr) return nan;
    at_cut = before->second;
  }
  const double gain = late - at_cut;
  return higher_is_better ? gain : -gain;
}

}  // namespace mixlab::lab
