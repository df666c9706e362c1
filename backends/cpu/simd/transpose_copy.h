// A float32 copy whose two innermost axes are swapped between source and destination: the
// transposes that token-mixing MLPs make between [B, N, d] and [B, d, N] (mlp-mixer's, the
// feed-forward-only mixer's, and their gradients). The element-by-element loop of the copy kernel
// reads such a source one float per cache line and ran at about 1 ns an element; here a block of
// kWidth × kWidth floats goes through registers (Lanes::transpose): kWidth loads of source rows,
// one transpose, kWidth stores of destination rows (transpose_block, simd_lanes.h).
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cpu/simd/simd_lanes.h"
#include "core/parallel.h"

namespace mixlab::cpu {

// dst[j·ld_dst + i] = src[i·ld_src + j] for i < rows, j < cols, for `count` such matrices
// (src_step and dst_step floats apart). Threads take blocks of kWidth source rows.
inline void transpose_matrices(const float* src, int64_t ld_src, int64_t src_step, float* dst,
                               int64_t ld_dst, int64_t dst_step, int64_t rows, int64_t cols,
                               int64_t count) {
#if defined(MIXLAB_HAS_LANES)
  using L = Lanes;
  constexpr int W = L::kWidth;
  const int64_t row_blocks = (rows + W - 1) / W;
  // Tasks are (matrix, block of W source rows); a thread takes enough of them to move at least
  // 4,096 floats, so that a small copy is not split.
  const int64_t grain = std::max<int64_t>(1, 16 * 256 / (W * std::max<int64_t>(cols, 1)));
  parallel_for(count * row_blocks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t item = t / row_blocks, i0 = (t % row_blocks) * W;
      const float* s = src + item * src_step;
      float* d = dst + item * dst_step;
      const int64_t live_rows = std::min<int64_t>(W, rows - i0);
      const typename L::Mask row_lanes = L::first(live_rows);
      for (int64_t j0 = 0; j0 < cols; j0 += W)
        transpose_block(s + i0 * ld_src + j0, ld_src, live_rows, std::min<int64_t>(W, cols - j0),
                        d + j0 * ld_dst + i0, ld_dst, row_lanes);
    }
  });
#else
  parallel_for(count, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          dst[item * dst_step + j * ld_dst + i] = src[item * src_step + i * ld_src + j];
  });
#endif
}

}  // namespace mixlab::cpu
