// Reductions over the middle axis of [outer, n, inner], and the running log-sum-exp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/row_max.h"
#include "backends/cpu/row_partials.h"
#include "backends/cpu/strided.h"
#include "backends/libm_math.h"
#include "backends/scan_ops.h"
#include "core/dtype_dispatch.h"

namespace mixlab {
namespace {

// Column sums of a [rows, width] matrix with few columns and many rows: a bias gradient, [1,
// tokens, d]. Split by columns, each of two threads streamed half of every row (256 of a row's
// 512 bytes at d = 128) and the sum ran slower on 2 threads than on 1. Here the rows are cut into
// a fixed number of blocks whatever the thread count (row_partials.h), so every thread count
// gives the same bits.
constexpr int64_t kRowBlocks = 16;
constexpr int64_t kMinRowsForBlocks = 4 * kRowBlocks;
constexpr int64_t kMaxBlockedWidth = 1 << 14;  // the partial rows stay in cache

template <typename T>
void sum_columns_in_blocks(const T* in, int64_t rows, int64_t width, T* out) {
  auto sums =
      cpu::accumulate_row_blocks<T>(rows, width, kRowBlocks, [&](int64_t rb, int64_t re, T* acc) {
        for (int64_t r = rb; r < re; ++r) {
          const T* src = in + r * width;
          for (int64_t i = 0; i < width; ++i) acc[i] += src[i];
        }
      });
  for (int64_t i = 0; i < width; ++i) out[i] = sums.column(i);
}

// Σ x over n elements in double, in kLanes independent sums (element i into lane i % kLanes),
// then the lanes in order: one running sum is a chain of dependent additions, 4 cycles each
// (a 1.4 M-parameter gradient norm took 1.6 ms; in lanes the loop vectorises and runs at the
// memory's speed).
constexpr int kLanes = 16;

template <typename T, typename Term>
double sum_in_lanes(const T* x, int64_t n, Term term) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(static_cast<double>(x[i + l]));
  for (int l = 0; i < n; ++i, ++l) lanes[l] += term(static_cast<double>(x[i]));
  double total = 0;
  for (double v : lanes) total += v;
  return total;
}

// Σ term(x[i]) over one long row: a slice per thread, each in lanes, the slices added in order.
template <typename T, typename Term>
double sum_long_row(const T* x, int64_t n, Term term) {
  const int chunks = num_threads();
  thread_local std::vector<double> partial;
  partial.assign(chunks, 0.0);
  double* sums = partial.data();  // (the workers must see this thread's buffer, not their own)
  const int64_t per = (n + chunks - 1) / chunks;
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
      sums[c] =
          c * per < n ? sum_in_lanes(x + c * per, std::min(n, (c + 1) * per) - c * per, term) : 0.0;
  });
  double total = 0;
  for (int c = 0; c < chunks; ++c) total += sums[c];
  return total;
}

// From this many elements one row's sum is split over the threads (sum_long_row).
constexpr int64_t kLongRow = 1 << 16;

constexpr auto kValue = [](double v) { return v; };
constexpr auto kSquare = [](double v) { return v * v; };

}  // namespace

void CpuBackend::reduce(ReduceOp op, const View& x, int64_t outer, int64_t n, int64_t inner,
                        const View& out) {
  dispatch_floating(x.dtype, "reduce", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* o = out.as<T>();
    T init = op == ReduceOp::Sum   ? T(0)
             : op == ReduceOp::Max ? -std::numeric_limits<T>::infinity()
                                   : std::numeric_limits<T>::infinity();
    if (inner == 1) {
      // One contiguous row per output: split rows over threads, or the row itself when there is
      // a single long row (then partial sums are combined in a fixed order).
      if (outer == 1 && n >= kLongRow && op == ReduceOp::Sum) {
        o[0] = static_cast<T>(sum_long_row(in, n, kValue));
        return;
      }
      parallel_for(outer, cpu::rows_per_task(n), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const T* row = in + r * n;
          T acc = init;
          if (op == ReduceOp::Sum)
            for (int64_t i = 0; i < n; ++i) acc += row[i];
          else if (op == ReduceOp::Max)
            acc = cpu::row_max(row, n);  // in lanes: the chain would stay scalar
          else
            for (int64_t i = 0; i < n; ++i) acc = row[i] < acc ? row[i] : acc;
          o[r] = acc;
        }
      });
      return;
    }
    if (op == ReduceOp::Sum && outer == 1 && n >= kMinRowsForBlocks && inner <= kMaxBlockedWidth) {
      sum_columns_in_blocks(in, n, inner, o);
      return;
    }
    // inner > 1: accumulate whole rows of `inner` at a time (vectorised along inner). The threads
    // split the outputs, each summed over n in order, so the split never changes a result. The
    // grain counts work (n elements per output), not outputs: a bias gradient, [1, rows, d], has
    // only d outputs but rows x d elements to add, and would otherwise stay on one thread.
    int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, n));
    parallel_for(outer * inner, grain, [&](int64_t b, int64_t e) {
      for (int64_t idx = b; idx < e;) {
        int64_t r = idx / inner, i0 = idx % inner;
        int64_t i1 = std::min(inner, i0 + (e - idx));
        T* dst = o + r * inner;
        for (int64_t i = i0; i < i1; ++i) dst[i] = init;
        for (int64_t j = 0; j < n; ++j) {
          const T* src = in + (r * n + j) * inner;
          if (op == ReduceOp::Sum)
            for (int64_t i = i0; i < i1; ++i) dst[i] += src[i];
          else if (op == ReduceOp::Max)
            for (int64_t i = i0; i < i1; ++i) dst[i] = src[i] > dst[i] ? src[i] : dst[i];
          else
            for (int64_t i = i0; i < i1; ++i) dst[i] = src[i] < dst[i] ? src[i] : dst[i];
        }
        idx += i1 - i0;
      }
    });
  });
}

void CpuBackend::sum_squares(const View& x, const View& out) {
  double total = 0;
  dispatch_floating(x.dtype, "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = x.numel();
    total =
        n >= kLongRow ? sum_long_row(x.as<T>(), n, kSquare) : sum_in_lanes(x.as<T>(), n, kSquare);
  });
  dispatch_floating(out.dtype, "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    out.as<T>()[0] = static_cast<T>(total);
  });
}

void CpuBackend::logcumsumexp(const View& x, int64_t outer, int64_t n, int64_t inner,
                              const View& y) {
  dispatch_floating(x.dtype, "logcumsumexp", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    parallel_for(outer * inner, 64, [&](int64_t b, int64_t e) {
      for (int64_t col = b; col < e; ++col) {
        const int64_t start = (col / inner) * n * inner + col % inner;
        scan::logcumsumexp_column<LibmMath>(in + start, out + start, n, inner);
      }
    });
  });
}

void CpuBackend::logcumsumexp_backward(const View& x, const View& y, const View& dy, int64_t outer,
                                       int64_t n, int64_t inner, const View& dx) {
  dispatch_floating(x.dtype, "logcumsumexp_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<T>();
    const T* py = y.as<T>();
    const T* pg = dy.as<T>();
    T* pd = dx.as<T>();
    parallel_for(outer * inner, 64, [&](int64_t b, int64_t e) {
      for (int64_t col = b; col < e; ++col) {
        const int64_t start = (col / inner) * n * inner + col % inner;
        scan::logcumsumexp_backward_column<LibmMath>(px + start, py + start, pg + start, pd + start,
                                                     n, inner);
      }
    });
  });
}

}  // namespace mixlab
