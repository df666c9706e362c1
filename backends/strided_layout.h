// N strided views of one shape, laid out for walking them together: size-1 axes are dropped and
// neighbouring axes merged wherever every view is contiguous across them, so that contiguous and
// simply broadcast operands become one flat loop. The CPU's StridedLoop (cpu/strided.h) and the
// GPU's Strided (cuda/common.cuh) both start from it. Host code; no allocation.
#pragma once
#include <array>
#include <cstdint>

#include "backends/backend.h"

namespace mixlab {

template <int N>
struct StridedLayout {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  StridedLayout() = default;
  // Every view has `shape_of`'s shape (broadcast strides already applied).
  StridedLayout(const View& shape_of, const std::array<const View*, N>& views) {
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
    if (ndim == 0) {  // a single element: one axis of length 1
      shape[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 1;
      ndim = 1;
    }
  }
};

}  // namespace mixlab
