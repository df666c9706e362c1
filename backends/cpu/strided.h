// Walking several strided views of one shape together, for the CPU kernels. Axes are first
// coalesced (merged where every operand is contiguous across them), so contiguous and simply
// broadcast inputs become one flat loop that the compiler vectorises.
#pragma once
#include <array>
#include <cstdint>

#include "backends/backend.h"
#include "core/error.h"
#include "core/parallel.h"

namespace mixlab::cpu {

template <int N>
struct StridedLoop {
  int ndim = 0;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];

  // All views must have `shape_of`'s shape (broadcast strides already applied).
  StridedLoop(const View& shape_of, const std::array<const View*, N>& views) {
    for (int d = 0; d < shape_of.ndim; ++d) {
      if (shape_of.shape[d] == 1) continue;  // size-1 axes carry no iteration
      bool merge = ndim > 0;
      for (int k = 0; k < N && merge; ++k)
        merge = strides[k][ndim - 1] == views[k]->strides[d] * shape_of.shape[d];
      if (merge) {
        shape[ndim - 1] *= shape_of.shape[d];
        for (int k = 0; k < N; ++k) strides[k][ndim - 1] = views[k]->strides[d];
      } else {
        shape[ndim] = shape_of.shape[d];
        for (int k = 0; k < N; ++k) strides[k][ndim] = views[k]->strides[d];
        ++ndim;
      }
    }
    if (ndim == 0) {  // a single element
      shape[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 0;
      ndim = 1;
    }
  }

  // fn(offsets[N], inner_length, inner_strides[N]) for every row of the innermost axis.
  template <typename F>
  void run(const F& fn) const {
    int64_t inner = shape[ndim - 1];
    int64_t rows = 1;
    for (int d = 0; d < ndim - 1; ++d) rows *= shape[d];
    std::array<int64_t, N> inner_strides;
    for (int k = 0; k < N; ++k) inner_strides[k] = strides[k][ndim - 1];
    int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, inner));
    parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
      // Multi-index of row `begin`, then increment odometer-style.
      int64_t index[kMaxDims] = {};
      int64_t rem = begin;
      for (int d = ndim - 2; d >= 0; --d) {
        index[d] = rem % shape[d];
        rem /= shape[d];
      }
      for (int64_t r = begin; r < end; ++r) {
        std::array<int64_t, N> offsets{};
        for (int k = 0; k < N; ++k)
          for (int d = 0; d < ndim - 1; ++d) offsets[k] += index[d] * strides[k][d];
        fn(offsets, inner, inner_strides);
        for (int d = ndim - 2; d >= 0; --d) {
          if (++index[d] < shape[d]) break;
          index[d] = 0;
        }
      }
    });
  }
};

}  // namespace mixlab::cpu
