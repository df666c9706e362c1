// Reductions along the middle axis of x seen as [outer, n, inner], the squared norm, and the
// running log-sum-exp.
#include <algorithm>
#include <limits>

#include "backends/reference/reference_backend.h"

namespace mixlab {

// out[o, i] = Σ_j x[o, j, i]  (or max_j, min_j; the identity when n = 0)
void ReferenceBackend::reduce(ReduceOp op, const View& x, int64_t outer, int64_t n, int64_t inner,
                              const View& out) {
  dispatch_floating(x.dtype, "reduce", [&](auto tag) {
    using T = decltype(tag);
    const T inf = std::numeric_limits<T>::infinity();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        T acc = op == ReduceOp::Sum ? T(0) : op == ReduceOp::Max ? -inf : inf;
        for (int64_t j = 0; j < n; ++j) {
          const T v = x.as<T>()[(o * n + j) * inner + i];
          if (op == ReduceOp::Sum) acc += v;
          if (op == ReduceOp::Max) acc = v > acc ? v : acc;
          if (op == ReduceOp::Min) acc = v < acc ? v : acc;
        }
        out.as<T>()[o * inner + i] = acc;
      }
    }
  });
}

// out = Σ_i x[i]², summed in float64
void ReferenceBackend::sum_squares(const View& x, const View& out) {
  double total = 0;
  dispatch_floating(x.dtype, "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i) total += double(x.as<T>()[i]) * double(x.as<T>()[i]);
  });
  dispatch_floating(out.dtype, "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    out.as<T>()[0] = static_cast<T>(total);
  });
}

// y[j] = log Σ_{j' ≤ j} exp(x[j']), as the running y[j] = log(exp(y[j−1]) + exp(x[j])), each
// pair shifted by its larger term.
void ReferenceBackend::logcumsumexp(const View& x, int64_t outer, int64_t n, int64_t inner,
                                    const View& y) {
  dispatch_floating(x.dtype, "logcumsumexp", [&](auto tag) {
    using T = decltype(tag);
    const T none = -std::numeric_limits<T>::infinity();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        T running = none;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (o * n + j) * inner + i;
          const T v = x.as<T>()[at];
          const T hi = std::max(running, v);
          running = hi == none ? hi : hi + std::log(std::exp(running - hi) + std::exp(v - hi));
          y.as<T>()[at] = running;
        }
      }
    }
  });
}

// dx[j] = Σ_{i ≥ j} dy[i] · exp(x[j] − y[i])   (y[i] ≥ x[j] there: every exponent is ≤ 0)
void ReferenceBackend::logcumsumexp_backward(const View& x, const View& y, const View& dy,
                                             int64_t outer, int64_t n, int64_t inner,
                                             const View& dx) {
  dispatch_floating(x.dtype, "logcumsumexp_backward", [&](auto tag) {
    using T = decltype(tag);
    auto idx = [&](int64_t o, int64_t j, int64_t i) { return (o * n + j) * inner + i; };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          T sum = 0;
          for (int64_t k = j; k < n; ++k)
            sum += dy.as<T>()[idx(o, k, i)] *
                   std::exp(x.as<T>()[idx(o, j, i)] - y.as<T>()[idx(o, k, i)]);
          dx.as<T>()[idx(o, j, i)] = sum;
        }
      }
    }
  });
}

}  // namespace mixlab
