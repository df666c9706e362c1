// One (b, h) item of the attention core's [B, H, rows, cols] operands (cpu_attention.cpp and
// attention_short_keys.cpp): a matrix's first element and row stride, and its mask's rows.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/backend.h"

namespace mixlab::cpu {

// One (b, h) matrix of a [B, H, rows, cols] view: its first element and its row stride (a view
// of one row may carry any stride there; cblas wants at least the row's length).
template <typename T>
struct Mat {
  T* data;
  int64_t ld;
};
template <typename T>
Mat<T> mat(const View& view, int64_t b, int64_t h) {
  T* p = view.as<T>() + b * view.strides[0] + h * view.strides[1];
  int64_t ld = view.shape[2] > 1 ? view.strides[2] : std::max<int64_t>(1, view.shape[3]);
  return {p, ld};
}

// The mask of one (b, h): element (i, j) at data[i * row + j * col]; data null: all allowed.
template <typename T>
struct MaskRows {
  const T* data = nullptr;
  int64_t row = 0, col = 0;
  bool allowed(int64_t i, int64_t j) const { return !data || data[i * row + j * col] != T(0); }
  const T* row_of(int64_t i) const { return data ? data + i * row : nullptr; }  // (when col == 1)
};
template <typename T>
MaskRows<T> mask_rows(const View& mask, int64_t b, int64_t h) {
  if (!mask.data) return {};
  return {mask.as<T>() + b * mask.strides[0] + h * mask.strides[1], mask.strides[2],
          mask.strides[3]};
}

}  // namespace mixlab::cpu
