// A float32 product with a tall A and a short inner axis, C = alpha·A·op(B) + beta·C: a linear
// layer's forward (X Wᵀ) and its input gradient (dY W), thousands of rows against k ≤ 1024.
// OpenBLAS packs all of A into its own layout first; for these shapes that pass costs more than
// it saves, and PyTorch's MKL ran them 1.2-1.3x faster. This kernel reads A's rows where they
// are and packs only B (a few hundred KB). Each element of C is one chain of fused multiply-adds
// over k in order, so the thread count never changes a result.
#pragma once
#include <cstdint>

#include "backends/backend.h"

namespace mixlab::cpu {

// Whether tall_gemm takes this product: float32, A not transposed, 256 ≤ m, 16 ≤ n, k ≤ 1024,
// and a build with AVX-512 or AVX2 (without, always false: OpenBLAS multiplies).
bool tall_gemm_fits(const GemmArgs& g);

// gemm_epilogue's pass (backends/kernels.def) on C's rows: bias [n] (or null), aux [m, n].
struct TallEpilogue {
  GemmEpilogue kind;
  const float* bias;
  float* aux;
};

// Batch item i of g, split over the pool by blocks of rows. Only when tall_gemm_fits(g). With an
// epilogue, each block of rows gets it as soon as the block's product is done (still in L1).
void tall_gemm(const GemmArgs& g, int64_t i, const TallEpilogue* epilogue = nullptr);

}  // namespace mixlab::cpu
