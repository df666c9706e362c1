// What the product kernels (tall_gemm.cpp, long_gemm.cpp, short_gemm.cpp) share: a tile of C
// is R rows × W registers (simd_lanes.h: 16 floats with AVX-512, 8 with AVX2), held in
// accumulators; a product's columns are cut into panels of kTileVectors registers (64 or 16
// columns) whose last one may be partly filled, and B's panels are packed one way.
#pragma once
#include "backends/cpu/simd/simd_lanes.h"
#if defined(MIXLAB_HAS_LANES)
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace mixlab::cpu {

constexpr int kTileRows = Lanes::kTileRows;                   // rows of C per tile
constexpr int kTileVectors = Lanes::kTileVectors;             // registers across a panel
constexpr int64_t kTilePanel = Lanes::kWidth * kTileVectors;  // columns per panel

// The registers of a product's panels: every one of a full panel, and those of the last panel
// (tail_vectors of them hold columns, the last one masked).
struct PanelMasks {
  explicit PanelMasks(int64_t n) {
    panels = (n + kTilePanel - 1) / kTilePanel;
    const int64_t tail = n - (panels - 1) * kTilePanel;  // 1..kTilePanel columns
    tail_vectors = static_cast<int>((tail + Lanes::kWidth - 1) / Lanes::kWidth);
    for (int w = 0; w < kTileVectors; ++w) {
      full[w] = Lanes::all();
      last[w] = Lanes::first(tail - Lanes::kWidth * w);
    }
  }
  int64_t panels;
  int tail_vectors;
  Lanes::Mask full[kTileVectors], last[kTileVectors];
};

// C[0..R, 0..kWidth·W) (masked by `masks` on the right) = alpha · A · panel, then + C
// (add_to_c), or + beta·C. The panel holds k rows of kTilePanel floats (aligned); a(r, p) is A's
// element in row r of the tile at step p, wherever the caller keeps it. Per step: W loads of the
// panel's row and R broadcasts feed R·W fused multiply-adds into accumulators that stay in
// registers.
//
// Lines to prefetch (optional): one per step, so the caller's data for later tiles arrives
// while this one computes, a line at a time (a burst of prefetches would wait for free fill
// buffers). The lines run on in memory from `next`, or in rows of lines_per_row lines,
// row_stride bytes apart (a block of C's rows). for_write: they will be written (prefetchw: they
// arrive owned, so the stores need not fetch them first).
struct LinesAhead {
  const char* next = nullptr;
  int64_t count = 0;
  int64_t lines_per_row = 0;  // 0: one run of lines
  int64_t row_stride = 0;
  bool for_write = false;
};

// Walks up to three LinesAhead, one line per call, each run after the one before.
class Prefetcher {
 public:
  Prefetcher(const LinesAhead& first, const LinesAhead& second, const LinesAhead& third)
      : runs_{first, second, third} {
    start();
  }
  void step() {
    while (left_ == 0) {  // this run is done: on to the next one with lines, if any
      if (run_ + 1 == kRuns) return;
      ++run_;
      start();
    }
    if (runs_[run_].for_write)
      __builtin_prefetch(line_, 1, 2);
    else
      _mm_prefetch(line_, _MM_HINT_T1);
    --left_;
    line_ += 64;
    if (++in_row_ == runs_[run_].lines_per_row)
      in_row_ = 0, row_ += runs_[run_].row_stride, line_ = row_;
  }

 private:
  static constexpr int kRuns = 3;
  void start() { row_ = line_ = runs_[run_].next, in_row_ = 0, left_ = runs_[run_].count; }
  LinesAhead runs_[kRuns];
  int run_ = 0;
  const char *row_ = nullptr, *line_ = nullptr;
  int64_t in_row_ = 0, left_ = 0;
};

template <int R, int W, class ElementOfA>
inline void multiply_tile(const ElementOfA& a, const float* panel, int64_t k, float* c, int64_t ldc,
                          const Lanes::Mask* masks, float alpha, float beta, bool add_to_c,
                          LinesAhead ahead = {}, LinesAhead then_ahead = {},
                          LinesAhead last_ahead = {}) {
  using L = Lanes;
  L::V acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) acc[r][w] = L::zero();
  Prefetcher prefetch(ahead, then_ahead, last_ahead);
  const int64_t prefetches = ahead.count + then_ahead.count + last_ahead.count;
  for (int64_t p = 0; p < k; ++p) {
    if (p < prefetches) prefetch.step();
    L::V bv[W];
    for (int w = 0; w < W; ++w) bv[w] = L::load(panel + p * kTilePanel + L::kWidth * w);
    for (int r = 0; r < R; ++r) {
      const L::V av = L::set1(a(r, p));
      for (int w = 0; w < W; ++w) acc[r][w] = L::fmadd(av, bv[w], acc[r][w]);
    }
  }
  const L::V alpha_v = L::set1(alpha), beta_v = L::set1(beta);
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) {
      float* dst = c + r * ldc + L::kWidth * w;
      L::V v = L::mul(acc[r][w], alpha_v);
      if (add_to_c)
        v = L::add(v, L::load(dst, masks[w]));
      else if (beta != 0.0f)  // beta 0: C is not read (it may hold anything, NaN included)
        v = L::fmadd(beta_v, L::load(dst, masks[w]), v);
      L::store(dst, masks[w], v);
    }
}

// `floats` floats of a buffer the caller keeps between calls (a thread_local one: no malloc per
// product), starting on a cache line, so that a panel row's loads never straddle two lines.
inline float* aligned_scratch(std::vector<float>& buffer, int64_t floats) {
  buffer.resize(static_cast<size_t>(floats + 16));
  return buffer.data() + (16 - (reinterpret_cast<uintptr_t>(buffer.data()) / 4) % 16) % 16;
}

// op(B)'s columns [c0, c0 + cols) as k rows of kTilePanel floats, zero from cols to the end of
// its register (those lanes are multiplied, never stored: zeros keep them from being subnormals
// or NaNs that cost time). Whole registers are moved as registers, a partial one through a
// masked load: with a call to memcpy per row, or an element at a time, packing took longer than
// the products on the Linformer's and the synthesizer's items. Stored transposed (trans_b), B's
// rows are op(B)'s columns, moved kWidth × kWidth at a time through Lanes::transpose (rows past
// cols as zeros), with the rows' next lines asked for ahead. On gMLP's dY Zᵀ (49 columns, k =
// 256, B read from L3) the masked zeros (a memset per row before) and the prefetch took the
// product from 3.06-3.33 to 2.53-2.93 ms (best of 400 calls, one thread, three rounds).
// (GCC 12 takes the 512-bit shuffles' undefined first operands, inlined here, for uninitialised
// values: a false -Wmaybe-uninitialized.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
inline void pack_panel(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t c0,
                       int64_t cols, float* panel) {
  using L = Lanes;
  constexpr int64_t kW = L::kWidth;
  if (trans_b) {
    const int64_t whole_k = k / kW * kW;
    for (int64_t c = 0; c < cols; c += kW) {
      const float* rows = b + (c0 + c) * ldb;
      const int64_t group = std::min(kW, cols - c);  // op(B)'s columns in this register
      for (int64_t p = 0; p < whole_k; p += kW) {
        if (p % 16 == 0)
          for (int i = 0; i < group; ++i)
            _mm_prefetch(reinterpret_cast<const char*>(rows + i * ldb + p + 64), _MM_HINT_T0);
        L::V in[kW], out[kW];
        for (int i = 0; i < kW; ++i) in[i] = i < group ? L::loadu(rows + i * ldb + p) : L::zero();
        L::transpose(in, out);
        for (int j = 0; j < kW; ++j) L::store(panel + (p + j) * kTilePanel + c, out[j]);
      }
      for (int64_t p = whole_k; p < k; ++p)
        for (int i = 0; i < kW; ++i)
          panel[p * kTilePanel + c + i] = i < group ? rows[i * ldb + p] : 0.0f;
    }
  } else {
    const int64_t whole_cols = cols / kW * kW;
    const L::Mask tail = L::first(cols - whole_cols);
    for (int64_t p = 0; p < k; ++p) {
      const float* row = b + p * ldb + c0;
      float* dst = panel + p * kTilePanel;
      for (int64_t c = 0; c < whole_cols; c += kW) L::store(dst + c, L::loadu(row + c));
      if (whole_cols < cols) L::store(dst + whole_cols, L::load(row + whole_cols, tail));
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Kernel<R, W>::run for 1 ≤ rows ≤ kTileRows and 1 ≤ vectors ≤ kTileVectors (the edges of C get
// smaller tiles, each with its accumulators in registers). Each kernel needs a name of its own,
// even inside an anonymous namespace: GCC gives tile_of<Kernel> external linkage, so two files'
// `Tile` would share one instance of it (and one would call the other's kernels).
template <template <int, int> class Kernel, int R, int W = 1>
auto tile_of_width(int vectors) {
  if constexpr (W < kTileVectors) {
    if (vectors <= W) return &Kernel<R, W>::run;
    return tile_of_width<Kernel, R, W + 1>(vectors);
  } else {
    return &Kernel<R, W>::run;
  }
}

template <template <int, int> class Kernel, int R = 1>
auto tile_of(int rows, int vectors) {
  if constexpr (R < kTileRows) {
    if (rows <= R) return tile_of_width<Kernel, R>(vectors);
    return tile_of<Kernel, R + 1>(rows, vectors);
  } else {
    return tile_of_width<Kernel, R>(vectors);
  }
}

}  // namespace mixlab::cpu
#endif
