// The short product (short_gemm.h). op(B) is packed one panel (kTilePanel columns: 16 with AVX2,
// 64 with AVX-512) at a time, k rows of the panel's width, aligned; every tile of C's rows then
// passes over it while it is in cache (L1 with AVX2's panels; AVX-512's, 256 bytes a step, are
// in L2 past k = 128, as the tall kernel's are). A tile keeps R rows × W registers of C in
// accumulators (register_tile.h): per step along k, W loads of the panel's row and R broadcasts of
// A's elements, read in place (a row of A, or a column when A is stored transposed), feed R·W fused
// multiply-adds. C's m rows are dealt out evenly over ⌈m / 6⌉ tiles (49 rows: four of 6 and five
// of 5, not eight of 6 and one of 1), so that every tile has enough accumulators to hide the
// multiply-adds' latency.
#include "backends/cpu/short_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "backends/cpu/register_tile.h"

namespace mixlab::cpu {

#if defined(MIXLAB_HAS_LANES)
namespace {

constexpr int64_t kMinRows = kTileRows, kMaxRows = 64;
constexpr int64_t kMinCols = 8, kMaxInner = 512;

bool enabled() {
  static const bool on = [] {
    const char* env = std::getenv("MIXLAB_SHORT_GEMM");
    return env == nullptr || std::string_view(env) != "0";
  }();
  return on;
}

// op(B)'s columns [c0, c0 + cols) as k rows of kTilePanel floats, zero from cols up to the
// panel's last register (its lanes past n are multiplied, never stored: zeros keep them from
// being subnormals or NaNs that cost time). Whole registers are moved as registers: with a
// call to memcpy per row, or an element at a time, packing took longer than the products on the
// Linformer's and the synthesizer's items. Stored transposed (trans_b), B's rows are op(B)'s
// columns, moved kWidth × kWidth at a time through Lanes::transpose.
// (GCC 12 takes the 512-bit shuffles' undefined first operands, inlined here, for uninitialised
// values: a false -Wmaybe-uninitialized.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void pack_panel(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t c0, int64_t cols,
                int vectors, float* panel) {
  using L = Lanes;
  constexpr int64_t kW = L::kWidth;
  const int64_t whole_cols = cols / kW * kW;
  if (trans_b) {
    const int64_t whole_k = k / kW * kW;
    for (int64_t c = 0; c < whole_cols; c += kW) {
      const float* rows = b + (c0 + c) * ldb;
      for (int64_t p = 0; p < whole_k; p += kW) {
        L::V in[kW], out[kW];
        for (int i = 0; i < kW; ++i) in[i] = L::loadu(rows + i * ldb + p);
        L::transpose(in, out);
        for (int j = 0; j < kW; ++j) L::store(panel + (p + j) * kTilePanel + c, out[j]);
      }
      for (int64_t p = whole_k; p < k; ++p)
        for (int i = 0; i < kW; ++i) panel[p * kTilePanel + c + i] = rows[i * ldb + p];
    }
    for (int64_t c = whole_cols; c < cols; ++c)
      for (int64_t p = 0; p < k; ++p) panel[p * kTilePanel + c] = b[(c0 + c) * ldb + p];
  } else {
    for (int64_t p = 0; p < k; ++p) {
      const float* row = b + p * ldb + c0;
      float* dst = panel + p * kTilePanel;
      for (int64_t c = 0; c < whole_cols; c += kW) L::store(dst + c, L::loadu(row + c));
      for (int64_t c = whole_cols; c < cols; ++c) dst[c] = row[c];
    }
  }
  const int64_t width = int64_t{vectors} * kW;
  for (int64_t p = 0; p < k && cols < width; ++p)
    std::fill(panel + p * kTilePanel + cols, panel + p * kTilePanel + width, 0.0f);
}
#pragma GCC diagnostic pop

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
  return enabled() && m >= kMinRows && m <= kMaxRows && n >= kMinCols && k >= 1 && k <= kMaxInner;
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
    pack_panel(b, ldb, trans_b, k, c0, std::min(kTilePanel, n - c0), vectors, panel);
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
