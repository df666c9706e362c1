// The long product (long_gemm.h). k is taken 256 steps (a chunk) at a time. Each chunk's rows of
// A and B are first copied, in memory order, into small buffers laid out for the tiles: A as
// tiles of 6 of its columns (6 floats per step), B as panels of 64 of its columns (64 floats per
// step, aligned). Read where they are, rows 512 B to 2 KB apart fall into a few sets of L1
// and evict each other (that version ran at half OpenBLAS's speed). A tile of C, 6 rows × 64
// columns, is held in 24 AVX-512 accumulators: per step, 4 loads of the panel's row and 6
// broadcasts of the tile's elements of A feed 24 fused multiply-adds. A panel (64 KB) stays in
// L2 while every tile of rows passes over it; the tiles' sums are added into C, which is read
// and written once per chunk from L2. While a chunk computes, the next one's rows of A and B are
// prefetched into L2, one line per step of each tile, so packing does not wait on memory (a
// burst of prefetches per tile stalled on the fill buffers; spread out, the step's weight
// gradients ran 3-5% faster).
//
// One thread, best of 30 (bench/bench_matmul, AVX-512 Xeon), against OpenBLAS
// 0.3.21's SkylakeX kernels on the same buffers: 1.07-1.20x on the classifier's and translators'
// weight gradients (6272 or 1536 tokens into 128 × 128 up to 256 × 1024), 150-170 GFLOP/s.
#include "backends/cpu/simd/long_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/simd/register_tile.h"

namespace mixlab::cpu {

// AVX-512 only: with AVX2's 6 × 16 tiles (register_tile.h) this kernel ran at 0.90-0.96x of
// OpenBLAS's Zen kernels on the same shapes, so OpenBLAS keeps those.
#if defined(__AVX512F__)
namespace {

constexpr int kRows = kTileRows;        // rows of C per tile (columns of A)
constexpr int64_t kPanel = kTilePanel;  // columns of C (and of B) per panel
// Steps along k per pass over C. 256 rather than 128 (C read and written half as often, the
// panel out of L1): on Zen 4 (32 KB of L1 data), one thread, the long shapes ran 1-3%
// faster (k = 3136 and 6272, the classifier's weight gradients at 2 and 1 threads; k = 1536 at
// d = 256), the d = 128 translator's at k = 1536 unchanged.
constexpr int64_t kChunk = 256;
constexpr int64_t kMinInner = 256;
// A packed tile of A (a chunk's 6 columns) and panel of B (its 64 columns) are one cache line
// longer than their data: at 6 KB and 64 KB apart, packing a row of A into every tile (and a row
// of B into every panel) would hit the same few sets of L1 each time, and evict itself.
constexpr int64_t kTileFloats = kChunk * kRows + 16;
constexpr int64_t kPanelFloats = kChunk * kPanel + 16;
constexpr int64_t kMinSide = 16;
// C is read and written once per chunk: past 2 MB (L2), OpenBLAS's blocking of C wins (at
// 1024 × 1024 over k = 1024 it ran 1.12x as fast; at 512 × 1024 this kernel still won).
constexpr int64_t kMaxOutput = 512 * 1024;

// A tile of C over k steps of the packed chunk: a_pack holds, per step, the tile's 6 elements of
// A's row, b_pack the panel's 64 columns of B's row. Written with beta·C on the first chunk
// (`first`), added to C on the others.
template <int R, int W>
struct LongTile {
  static void run(const float* a_pack, const float* b_pack, int64_t k, float* c, int64_t ldc,
                  const Lanes::Mask* masks, float alpha, float beta, bool first, LinesAhead ahead) {
    const auto a = [a_pack](int r, int64_t p) { return a_pack[p * kRows + r]; };
    multiply_tile<R, W>(a, b_pack, k, c, ldc, masks, alpha, beta, !first, ahead);
  }
};

// The chunk's rows [0, steps) of A, as tiles of 6 of its columns: tile t holds, per step, A's
// elements [6t, 6t + 6) of that row. Read row by row, in memory order, so that the
// hardware prefetcher streams A in (by tiles, every row's line is a miss).
// sums (may be null): each row of the chunk added to it, in order.
void pack_a(const float* a, int64_t lda, int64_t m, int64_t steps, float* out, float* sums) {
  const int64_t full_tiles = m / kRows, rest = m - full_tiles * kRows;
  for (int64_t p = 0; p < steps; ++p) {
    const float* src = a + p * lda;
    if (sums)
      for (int64_t i = 0; i < m; ++i) sums[i] += src[i];
    float* dst = out + p * kRows;
    for (int64_t t = 0; t < full_tiles; ++t)  // one 24-byte copy per tile
      std::memcpy(dst + t * kTileFloats, src + t * kRows, kRows * sizeof(float));
    if (rest > 0)  // the last tile's kernel reads only its `rest` rows of C, so no zeros past m
      std::memcpy(dst + full_tiles * kTileFloats, src + full_tiles * kRows, rest * sizeof(float));
  }
}

// The chunk's rows [0, steps) of B as panels of 64 columns: panel j holds, per step, B's
// elements [64j, 64j + 64) of that row, zero past n. Read row by row, as A.
void pack_b(const float* b, int64_t ldb, int64_t n, int64_t steps, float* out) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  for (int64_t p = 0; p < steps; ++p) {
    const float* src = b + p * ldb;
    for (int64_t j = 0; j < panels; ++j) {
      float* dst = out + j * kPanelFloats + p * kPanel;
      const int64_t c0 = j * kPanel, cols = std::min<int64_t>(kPanel, n - c0);
      int64_t c = 0;
      for (; c < cols; ++c) dst[c] = src[c0 + c];
      for (; c < kPanel; ++c) dst[c] = 0.0f;
    }
  }
}

}  // namespace

bool long_gemm_fits(int64_t m, int64_t n, int64_t k) {
  return m >= kMinSide && n >= kMinSide && m * n <= kMaxOutput && k >= kMinInner &&
         k >= std::max(m, n);
}

void long_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc, float* a_sums) {
  if (a_sums) std::fill_n(a_sums, m, 0.0f);
  const PanelMasks masks(n);
  const int64_t panels = masks.panels;
  const int64_t tiles = (m + kRows - 1) / kRows;
  thread_local std::vector<float> a_buffer, b_buffer;
  float* a_pack = aligned_scratch(a_buffer, tiles * kTileFloats);
  float* b_pack = aligned_scratch(b_buffer, panels * kPanelFloats);
  for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
    const int64_t steps = std::min(kChunk, k - k0);
    const bool first = k0 == 0;
    pack_a(a + k0 * lda, lda, m, steps, a_pack, a_sums);
    pack_b(b + k0 * ldb, ldb, n, steps, b_pack);
    // The next chunk's rows of A and B (their bytes from the first row's start to the last
    // row's end), shared out over this chunk's tiles for them to prefetch.
    const int64_t next = std::min(kChunk, std::max<int64_t>(0, k - k0 - kChunk));
    const char* next_a = reinterpret_cast<const char*>(a + (k0 + kChunk) * lda);
    const char* next_b = reinterpret_cast<const char*>(b + (k0 + kChunk) * ldb);
    const int64_t a_lines = next > 0 ? ((next - 1) * lda + m + 15) / 16 : 0;
    const int64_t b_lines = next > 0 ? ((next - 1) * ldb + n + 15) / 16 : 0;
    const int64_t per_tile = (a_lines + b_lines + panels * tiles - 1) / (panels * tiles);
    int64_t issued = 0;
    for (int64_t j = 0; j < panels; ++j) {
      const bool is_last = j == panels - 1;
      const int vectors = is_last ? masks.tail_vectors : kTileVectors;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t r0 = t * kRows;
        const int rows = static_cast<int>(std::min<int64_t>(kRows, m - r0));
        LinesAhead ahead;  // lines [issued, issued + per_tile) of next_a's, then next_b's
        if (issued < a_lines)
          ahead = {next_a + 64 * issued, std::min(per_tile, a_lines - issued)};
        else if (issued < a_lines + b_lines)
          ahead = {next_b + 64 * (issued - a_lines),
                   std::min(per_tile, a_lines + b_lines - issued)};
        issued += ahead.count;
        tile_of<LongTile>(rows, vectors)(
            a_pack + t * kTileFloats, b_pack + j * kPanelFloats, steps, c + r0 * ldc + j * kPanel,
            ldc, is_last ? masks.last : masks.full, alpha, beta, first, ahead);
      }
    }
  }
}

#else  // no AVX-512 in this build: OpenBLAS multiplies everything

bool long_gemm_fits(int64_t, int64_t, int64_t) { return false; }
void long_gemm(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
               float, float*, int64_t, float*) {}

#endif

}  // namespace mixlab::cpu
