// One (b, h) item of the attention core's [B, H, rows, cols] operands, its mask's rows, and the
// softmax of a row of its scores: what cpu_attention.cpp's tiles and attention_short_keys.cpp's
// registers share, so both paths give a row the same probabilities.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/simd/float_rows.h"
#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/row_max.h"

namespace mixlab::cpu {

// This thread's buffer `which` (0-3) of at least `size` elements, grown once and reused by every
// later item and call: the per-(batch, head) cores' scratch.
template <typename T>
T* thread_scratch(int which, size_t size) {
  thread_local std::vector<T> buffers[4];
  if (buffers[which].size() < size) buffers[which].resize(size);
  return buffers[which].data();
}

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

// Asks for rows [0, rows) of x (cols each) to be brought into cache: the next item's operands,
// while this item computes (cpu_attention.cpp's cores, cpu_linear_attention.cpp). Into L2
// (locality 2: prefetcht1), not L1: an item's lines come in a burst (the classifier's 49-row
// heads: 294 lines in the forward, 490 in the backward), and prefetcht0 requests held L1's few
// miss buffers that the item's own loads then waited on. It takes 10-15% off the classifier's
// attention calls (49 tokens, 1 thread), up to 40% off the d=128 translator's backward (12
// tokens) and 6-10% off linear attention's. Two items ahead, or the rows about to be written
// (prefetchw) as well, measured no better.
template <typename T>
void prefetch_rows(Mat<T> x, int64_t rows, int64_t cols) {
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; c += kLine) __builtin_prefetch(x.data + i * x.ld + c, 0, 2);
}

// Row i of a tile of scores s (m scores): softmax over the allowed keys in place; returns the row's
// log-sum-exp, -inf (and a row of zeros) when no key is allowed. Float rows whose mask (if any)
// is contiguous along the keys run in AVX-512 or AVX2 registers (vector_math.h):
// the translator's masked rows of 12 keys had been a scalar exp per key. Otherwise, without a mask
// the maximum is row_max's, in lanes; a masked row skips its masked keys in one scalar pass.
template <typename T>
T softmax_allowed(T* s, int64_t m, const MaskRows<T>& mask, int64_t i) {
  constexpr T kNone = -std::numeric_limits<T>::infinity();
  T hi = kNone;
  if constexpr (std::is_same_v<T, float>)
    if (!mask.data || mask.col == 1)
      if (float lse; simd::softmax_row(s, s, m, mask.row_of(i), lse)) return lse;
  if (!mask.data) {
    hi = row_max(s, m);
    for (int64_t j = 0; j < m; ++j) s[j] = exp_of(s[j] - hi);
  } else {
    bool any = false;
    for (int64_t j = 0; j < m; ++j) {
      if (!mask.allowed(i, j)) continue;
      any = true;
      hi = s[j] > hi ? s[j] : hi;
    }
    if (!any) {
      std::fill(s, s + m, T(0));
      return kNone;
    }
    for (int64_t j = 0; j < m; ++j) s[j] = mask.allowed(i, j) ? exp_of(s[j] - hi) : T(0);
  }
  T total = 0;
  for (int64_t j = 0; j < m; ++j) total += s[j];
  T inv = T(1) / total;
  for (int64_t j = 0; j < m; ++j) s[j] *= inv;
  return hi + std::log(total);
}

// Row i's probabilities again, from its scores and the saved log-sum-exp.
template <typename T>
void probabilities_again(T* s, int64_t m, const MaskRows<T>& mask, int64_t i, T lse) {
  if (lse == -std::numeric_limits<T>::infinity()) {
    std::fill(s, s + m, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    if (!mask.data || mask.col == 1)
      if (simd::exp_shifted_row(s, m, lse, mask.row_of(i))) return;
  if (mask.data) {
    for (int64_t j = 0; j < m; ++j) s[j] = mask.allowed(i, j) ? exp_of(s[j] - lse) : T(0);
  } else {
    for (int64_t j = 0; j < m; ++j) s[j] = exp_of(s[j] - lse);
  }
}

}  // namespace mixlab::cpu
