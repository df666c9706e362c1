// Walking several strided views of one shape together, for the CPU kernels. Axes are first
// coalesced (backends/strided_layout.h), so contiguous and simply broadcast inputs become one
// flat loop that the compiler vectorises.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "backends/backend.h"
#include "backends/strided_layout.h"
#include "core/error.h"
#include "core/parallel.h"

namespace mixlab::cpu {

template <int N>
struct StridedLoop : StridedLayout<N> {
  using StridedLayout<N>::StridedLayout;  // (shape_of, views): all of shape_of's shape
  using StridedLayout<N>::ndim;
  using StridedLayout<N>::shape;
  using StridedLayout<N>::strides;

  // fn(offsets[N], length, strides[N]) over runs of the innermost axis that together cover every
  // element once. The elements, not the rows, are split over the threads: a contiguous operand
  // coalesces into a single row, which a split by rows would leave to one thread. A row shared by
  // two chunks is cut in two runs. Elementwise work has no order to keep, so any split gives the
  // same results.
  template <typename F>
  void run(const F& fn) const {
    int64_t inner = shape[ndim - 1];
    int64_t rows = 1;
    for (int d = 0; d < ndim - 1; ++d) rows *= shape[d];
    std::array<int64_t, N> inner_strides;
    for (int k = 0; k < N; ++k) inner_strides[k] = strides[k][ndim - 1];
    parallel_for(rows * inner, kElementGrain, [&](int64_t begin, int64_t end) {
      // Multi-index of the row holding `begin`, then increment odometer-style.
      int64_t index[kMaxDims] = {};
      int64_t rem = begin / inner, first = begin % inner;
      for (int d = ndim - 2; d >= 0; --d) {
        index[d] = rem % shape[d];
        rem /= shape[d];
      }
      for (int64_t at = begin; at < end;) {
        int64_t length = std::min(inner - first, end - at);
        std::array<int64_t, N> offsets{};
        for (int k = 0; k < N; ++k) {
          for (int d = 0; d < ndim - 1; ++d) offsets[k] += index[d] * strides[k][d];
          offsets[k] += first * inner_strides[k];
        }
        fn(offsets, length, inner_strides);
        at += length;
        first = 0;
        for (int d = ndim - 2; d >= 0; --d) {
          if (++index[d] < shape[d]) break;
          index[d] = 0;
        }
      }
    });
  }

  // Elements below which a loop is not split: waking the pool's threads costs microseconds, about
  // what one thread needs to stream this many floats through a binary op.
  static constexpr int64_t kElementGrain = 1 << 15;
};

}  // namespace mixlab::cpu
