// The short product (short_gemm.h). op(B) is packed one panel (kTilePanel columns: 16 with AVX2,
// 64 with AVX-512) at a time, k rows of the panel's width, aligned; every tile of C's rows then
// passes over it while it is in cache (L1 with AVX2's panels; AVX-512's, 256 bytes a step, are
// in L2 past k = 128, as the tall kernel's are). A tile keeps R rows × W registers of C in
// accumulators (register_tile.h): per step along k, W loads of the panel's row and R broadcasts of
// A's elements, read in place (a row of A, or a column when A is stored transposed), feed R·W fused
// multiply-adds. C's m rows are dealt out evenly over ⌈m / 6⌉ tiles (49 rows: four of 6 and five
// of 5, not eight of 6 and one of 1), so that every tile has enough accumulators to hide the
// multiply-adds' latency.
#include "backends/cpu/simd/short_gemm.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/simd/register_tile.h"

namespace mixlab::cpu {

#if defined(MIXLAB_HAS_LANES)
namespace {

constexpr int64_t kMinRows = kTileRows, kMaxRows = 64;
constexpr int64_t kMinCols = 8, kMaxInner = 512;

// A tile of C with its rows' elements of A read in place: A stored [m, k] (element (r, p) in row
// r), or stored [k, m] (trans_a: the tile's elements of step p side by side in A's row p).
template <bool kTransA>
struct ShortTile {
  template <int R, int W>
  struct Of {
    static void run(const float* a, int64_t lda, const float* panel, int64_t k, float* c,
                    int64_t ldc, const Lanes::Mask* masks, float alpha, float beta) {
      const auto element = [a, lda](int r, int64_t p) {
        return kTransA ? a[p * lda + r] : a[r * lda + p];
      };
      multiply_tile<R, W>(element, panel, k, c, ldc, masks, alpha, beta, false);
    }
  };
};

}  // namespace

bool short_gemm_fits(int64_t m, int64_t n, int64_t k) {
  return m >= kMinRows && m <= kMaxRows && n >= kMinCols && k >= 1 && k <= kMaxInner;
}

void short_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                bool trans_a, const float* b, int64_t ldb, bool trans_b, float beta, float* c,
                int64_t ldc) {
  thread_local std::vector<float> buffer;  // the calling thread's panel, reused
  float* panel = aligned_scratch(buffer, k * kTilePanel);
  const PanelMasks masks(n);
  const int64_t tiles = (m + kTileRows - 1) / kTileRows;
  for (int64_t j = 0; j < masks.panels; ++j) {
    const bool is_last = j == masks.panels - 1;
    const int vectors = is_last ? masks.tail_vectors : kTileVectors;
    const int64_t c0 = j * kTilePanel;
    pack_panel(b, ldb, trans_b, k, c0, std::min(kTilePanel, n - c0), panel);
    int64_t r0 = 0;
    for (int64_t t = 0; t < tiles; ++t) {
      const int rows = static_cast<int>(m / tiles + (t < m % tiles ? 1 : 0));
      const auto tile = trans_a ? tile_of<ShortTile<true>::Of>(rows, vectors)
                                : tile_of<ShortTile<false>::Of>(rows, vectors);
      tile(trans_a ? a + r0 : a + r0 * lda, lda, panel, k, c + r0 * ldc + c0, ldc,
           is_last ? masks.last : masks.full, alpha, beta);
      r0 += rows;
    }
  }
}

#else  // neither AVX-512 nor AVX2 in this build: OpenBLAS multiplies everything

bool short_gemm_fits(int64_t, int64_t, int64_t) { return false; }
void short_gemm(int64_t, int64_t, int64_t, float, const float*, int64_t, bool, const float*,
                int64_t, bool, float, float*, int64_t) {}

#endif

}  // namespace mixlab::cpu
