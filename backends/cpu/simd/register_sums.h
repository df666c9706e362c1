// Weighted sums of rows in vector registers (simd_lanes.h: AVX-512 or AVX2), for the
// per-(batch, head) cores whose products are too small for a cblas call each
// (attention_short_keys.cpp: the attention and synthesizer cores; cpu_linear_attention.cpp):
// y's rows = weights · x's rows, a block of output rows at once (kSumRows), one weight broadcast
// at a time against registers of features. Every sum runs in a fixed order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/attention_item.h"
#include "backends/cpu/simd/simd_lanes.h"
#include "backends/kernel_products.h"

namespace mixlab::cpu {

// f(std::integral_constant<int, R>{}) for the R = size, R ≤ G (a size the loops can unroll).
template <int R, int G, typename F>
void with_size(int64_t size, F&& f) {
  if constexpr (R <= G) {
    if (size == R) return f(std::integral_constant<int, R>{});
    return with_size<R + 1, G>(size, f);
  }
}

// Calls f(std::integral_constant<int, R>{}, first) over [0, count) in groups of R ≤ G rows, the
// groups as even as they can be: 49 rows are 7 groups of 7, not 6 of 8 and one of 1, whose single
// accumulator chain would wait on each FMA's latency.
template <int G, typename F>
void in_groups(int64_t count, F&& f) {
  if (count <= 0) return;
  const int64_t groups = (count + G - 1) / G, base = count / groups, extra = count % groups;
  int64_t first = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t size = base + (g < extra ? 1 : 0);
    with_size<1, G>(size, [&](auto rows) { f(rows, first); });
    first += size;
  }
}

#if defined(MIXLAB_HAS_LANES)
// A block of the weighted sums: kSumRows output rows × C registers of features (C ≤
// kSumColumns), each weight broadcast once against the block's registers of x's row. AVX-512:
// 8 × 2, AVX2: 6 × 2: 16 or 12 independent accumulator chains, which keep both FMA ports busy
// through their latency, and one broadcast serves two FMAs. (With one register of features per
// pass, every FMA needed a broadcast of its own and x's rows were read once per register: at the
// classifier's 49 keys and 32 features the loads, not the FMAs, set the pace, 2.5-3.8x slower
// with AVX-512 on rows 1,536 bytes apart.) Features that fit one register take C = 1.
constexpr int kSumRows = Lanes::kWidth == 16 ? 8 : 6;
constexpr int kSumColumns = 2;

// y[r, :cols] = Σ_{t < count} w[r·w_row + t·w_step] · x[t, :cols] for R rows of y: a weighted
// sum of rows of x, weights broadcast one at a time. E.g. over keys (w_row = W, w_step = 1):
// P v, dS k; over queries, for R keys (w_row = 1, w_step = W): Pᵀ dout, dSᵀ q.
template <int R, int C>
void weighted_rows(const float* w, int64_t w_row, int64_t w_step, int64_t count, Mat<const float> x,
                   int64_t cols, float* y, int64_t ldy) {
  using L = Lanes;
  for (int64_t c0 = 0; c0 < cols; c0 += C * L::kWidth) {
    L::Mask lanes[C];  // (a register wholly past cols: no lane loaded or stored)
    for (int c = 0; c < C; ++c) lanes[c] = L::first(cols - c0 - c * L::kWidth);
    L::V acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = L::zero();
    for (int64_t t = 0; t < count; ++t) {
      L::V xt[C];
      for (int c = 0; c < C; ++c) xt[c] = L::load(x.data + t * x.ld + c0 + c * L::kWidth, lanes[c]);
      for (int r = 0; r < R; ++r) {
        const L::V weight = L::set1(w[r * w_row + t * w_step]);
        for (int c = 0; c < C; ++c) acc[r][c] = L::fmadd(weight, xt[c], acc[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) L::store(y + r * ldy + c0 + c * L::kWidth, lanes[c], acc[r][c]);
  }
}

// weighted_rows over all `rows` rows of y, in groups of up to kSumRows.
inline void weighted_sum_rows(const float* w, int64_t w_row, int64_t w_step, int64_t count,
                              Mat<const float> x, int64_t cols, float* y, int64_t ldy,
                              int64_t rows) {
  kernel_products::ProductSpan product;  // MIXLAB_DEBUG's table of fused kernels
  auto run = [&](auto registers) {
    constexpr int C = decltype(registers)::value;
    in_groups<kSumRows>(rows, [&](auto size, int64_t r0) {
      constexpr int R = decltype(size)::value;
      weighted_rows<R, C>(w + r0 * w_row, w_row, w_step, count, x, cols, y + r0 * ldy, ldy);
    });
  };
  if (cols > Lanes::kWidth)
    run(std::integral_constant<int, kSumColumns>{});
  else
    run(std::integral_constant<int, 1>{});
}

#else
// Without vector registers, the same sums as plain loops, each in t's order.
inline void weighted_sum_rows(const float* w, int64_t w_row, int64_t w_step, int64_t count,
                              Mat<const float> x, int64_t cols, float* y, int64_t ldy,
                              int64_t rows) {
  kernel_products::ProductSpan product;  // MIXLAB_DEBUG's table of fused kernels
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * ldy;
    std::fill(yr, yr + cols, 0.0f);
    for (int64_t t = 0; t < count; ++t) {
      const float weight = w[r * w_row + t * w_step];
      const float* xt = x.data + t * x.ld;
      for (int64_t c = 0; c < cols; ++c) yr[c] += weight * xt[c];
    }
  }
}
#endif

}  // namespace mixlab::cpu
