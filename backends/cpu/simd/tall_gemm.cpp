// The tall product (tall_gemm.h). B is packed into panels of kTilePanel columns, each k rows of
// kTilePanel floats, zero past n. A tile of C keeps its accumulators in registers
// (register_tile.h): with AVX-512, 6 rows × 64 columns in 24 registers, per step along k 4 loads
// of the panel's row and 6 broadcasts of A's elements feed 24 fused multiply-adds; with AVX2,
// 6 rows × 16 columns in 12 registers (2 loads, 6 broadcasts, 12 FMAs). Each thread takes whole
// blocks of 6 rows and runs them across every panel, so its 6 rows of A stay in L1 while the
// panels (at most 1 MB) stream from L2. Each tile prefetches, a line per step, the lines of C (and
// of the epilogue's aux) that the next block will write: a product's output (12.8 MB for the
// classifier's FFN) is rarely in cache, and a store to a line that is not has to read it from
// memory first, with the FMAs waiting: the FFN's products take 6-17% less time in the
// classifier's training step. GELU's slope (BiasGeluSlope), read only by the backward, is
// streamed out from a block in L1 instead. The first panel's tile also asks for the next block's
// rows of A: the hardware's prefetch alone leaves the classifier's products 2-3% slower.
//
// Why not OpenBLAS for these shapes: one thread, this kernel is 1.11-1.38x as fast as OpenBLAS
// 0.3.21's SkylakeX kernels on the classifier's and both translators' shapes on an AVX-512 Xeon,
// and 1.03-1.09x its Zen kernels on an AVX2 EPYC (bench/bench_matmul): no pass of OpenBLAS's own
// to zero C, and the epilogue on rows still in L1.
#include "backends/cpu/simd/tall_gemm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/epilogue_row.h"
#include "backends/cpu/row_grain.h"
#include "core/parallel.h"

#include "backends/cpu/simd/register_tile.h"

namespace mixlab::cpu {

#if defined(MIXLAB_HAS_LANES)
namespace {

constexpr int kRows = kTileRows;
constexpr int64_t kPanel = kTilePanel;
constexpr int64_t kMinRows = 256;
constexpr int64_t kMinCols = 16;
constexpr int64_t kMaxInner = 1024;
constexpr int64_t kMaxPackedFloats = 256 * 1024;  // 1 MB of panels: they stay in L2
// Blocks of rows per chunk of the pool's split, so that a chunk is worth waking a thread for.
constexpr int64_t kMinChunkMacs = 96 * 96 * 96 / 2;

// B's panels: panel j holds op(B)'s columns [j·kPanel, (j + 1)·kPanel) as k rows of kPanel
// floats (register_tile.h's pack_panel), the panels split over the pool. The last panel's
// registers past n's last one are never loaded (TallTile<R, W> with W = the registers that hold
// columns), so they need no zeros.
void pack_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, float* out) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  parallel_for(panels, rows_per_task(kPanel * k), [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      pack_panel(b, ldb, trans_b, k, j * kPanel, std::min(kPanel, n - j * kPanel),
                 out + j * k * kPanel);
  });
}

// C[0..R, 0..kWidth·W) = alpha·A·panel + beta·C, A's rows read where they are.
template <int R, int W>
struct TallTile {
  static void run(const float* a, int64_t lda, const float* panel, int64_t k, float* c, int64_t ldc,
                  const Lanes::Mask* masks, float alpha, float beta, LinesAhead c_ahead,
                  LinesAhead aux_ahead, LinesAhead a_ahead) {
    const auto element = [a, lda](int r, int64_t p) { return a[r * lda + p]; };
    multiply_tile<R, W>(element, panel, k, c, ldc, masks, alpha, beta, false, c_ahead, aux_ahead,
                        a_ahead);
  }
};

}  // namespace

bool tall_gemm_fits(const GemmArgs& g) {
  const int64_t padded = (g.n + kPanel - 1) / kPanel * kPanel;
  return g.dtype == DType::F32 && !g.trans_a && g.m >= kMinRows && g.n >= kMinCols && g.k >= 1 &&
         g.k <= kMaxInner && g.k * padded <= kMaxPackedFloats;
}

void tall_gemm(const GemmArgs& g, int64_t i, const TallEpilogue* epilogue) {
  const float* a =
      static_cast<const float*>(g.a) + gemm_item_offset(g, i, g.stride_a, g.outer_stride_a);
  const float* b =
      static_cast<const float*>(g.b) + gemm_item_offset(g, i, g.stride_b, g.outer_stride_b);
  float* c = static_cast<float*>(g.c) + gemm_item_offset(g, i, g.stride_c, g.outer_stride_c);
  const int64_t m = g.m, n = g.n, k = g.k, panels = (n + kPanel - 1) / kPanel;
  // The calling thread's buffer, reused (no malloc per step), aligned to a cache line: a panel
  // row's loads must not straddle two lines (unaligned, the d=256 translator's shapes ran at
  // 0.88-0.94x of OpenBLAS).
  thread_local std::vector<float> buffer;
  float* packed = aligned_scratch(buffer, panels * k * kPanel);
  const float* bp = packed;  // (the workers must read this thread's buffer)
  pack_b(b, g.ldb, g.trans_b, k, n, packed);

  const PanelMasks masks(n);
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const int64_t blocks = (m + kRows - 1) / kRows;
  const int64_t grain = std::max<int64_t>(1, kMinChunkMacs / (kRows * n * k));
  // GELU's slope (BiasGeluSlope) is read only by the backward, long after: the tiles write the
  // block into a buffer that stays in L1, and the epilogue streams the slope out to C (no read
  // of C's lines from memory before they are written, no cache filled with them).
  const bool stream_c = epilogue && epilogue->kind == GemmEpilogue::BiasGeluSlope && beta == 0.0f &&
                        reinterpret_cast<uintptr_t>(c) % 64 == 0 && g.ldc % 16 == 0;
  parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> block_buffer;
    float* block = stream_c ? aligned_scratch(block_buffer, kRows * panels * kPanel) : nullptr;
    const int64_t ld_block = panels * kPanel;
    // Lines per row of A, one more where a row does not start on a line.
    const int64_t a_lines =
        (k * 4 + 63) / 64 + ((reinterpret_cast<uintptr_t>(a) | (g.lda * 4)) % 64 != 0);
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * kRows;
      const int rows = static_cast<int>(std::min<int64_t>(kRows, m - r0));
      const auto body = tile_of<TallTile>(rows, kTileVectors),
                 end = tile_of<TallTile>(rows, masks.tail_vectors);
      for (int64_t j = 0; j < panels; ++j) {
        const bool is_last = j == panels - 1;
        // While this tile computes, the lines the next block will write in this panel's columns
        // arrive: C's (owned, so the stores need not read them from memory first) and the
        // epilogue's aux (read by Times, written by the others).
        LinesAhead c_ahead, aux_ahead, a_ahead;
        if (blk + 1 < b1) {
          const int64_t next_rows = std::min<int64_t>(kRows, m - r0 - kRows);
          if (j == 0)  // and A's rows of the next block (the hardware's prefetch is late)
            a_ahead = {reinterpret_cast<const char*>(a + (r0 + kRows) * g.lda), next_rows * a_lines,
                       a_lines, g.lda * 4, false};
          const int64_t lines = ((std::min(n - j * kPanel, kPanel)) * 4 + 63) / 64;
          if (!stream_c)
            c_ahead = {reinterpret_cast<const char*>(c + (r0 + kRows) * g.ldc + j * kPanel),
                       next_rows * lines, lines, g.ldc * 4, true};
          if (epilogue && epilogue->aux)
            aux_ahead = {
                reinterpret_cast<const char*>(epilogue->aux + (r0 + kRows) * n + j * kPanel),
                next_rows * lines, lines, n * 4, epilogue->kind != GemmEpilogue::Times};
        }
        float* out = stream_c ? block + j * kPanel : c + r0 * g.ldc + j * kPanel;
        (is_last ? end : body)(a + r0 * g.lda, g.lda, bp + j * k * kPanel, k, out,
                               stream_c ? ld_block : g.ldc, is_last ? masks.last : masks.full,
                               alpha, beta, c_ahead, aux_ahead, a_ahead);
      }
      if (stream_c)
        for (int r = 0; r < rows; ++r) {
          float* pre = block + r * ld_block;
          bias_row(pre, epilogue->bias, pre, n);
          gelu_and_slope_row(pre, epilogue->aux + (r0 + r) * n, c + (r0 + r) * g.ldc, n, true);
        }
      else if (epilogue)  // the block's rows of C (6·n floats) are still in L1
        for (int r = 0; r < rows; ++r)
          epilogue_row(epilogue->kind, c + (r0 + r) * g.ldc, epilogue->bias,
                       epilogue->aux ? epilogue->aux + (r0 + r) * n : nullptr, n);
    }
    if (stream_c) _mm_sfence();  // the streamed stores are visible before the pool's join
  });
}

#else  // neither AVX-512 nor AVX2 in this build: OpenBLAS multiplies everything

bool tall_gemm_fits(const GemmArgs&) { return false; }
void tall_gemm(const GemmArgs&, int64_t, const TallEpilogue*) {}

#endif

}  // namespace mixlab::cpu
