// A float32 product with a long inner axis and a small C, C = alpha·Aᵀ·B + beta·C with A stored
// [k, m] and B [k, n]: a linear layer's weight gradient dYᵀX, the tokens of a whole batch (k in
// the thousands) summed into a d' × d matrix. Both operands are copied into tile layouts a chunk
// of k at a time, in memory order and prefetched, so the copy stays in L1 and L2 and overlaps the
// products (long_gemm.cpp says how). Summation order depends only on k and the shape.
#pragma once
#include <cstdint>

namespace mixlab::cpu {

// Whether long_gemm takes an [m, n] product over k (A transposed, B not, both float32): k at
// least 256 and at least C's larger side, 16 ≤ m, n, and C at most 512K floats. Always false in
// a build without AVX-512.
bool long_gemm_fits(int64_t m, int64_t n, int64_t k);

// C[m, n] (row stride ldc) = alpha · Aᵀ B + beta · C, A [k, m] (row stride lda), B [k, n] (row
// stride ldb), on the calling thread. beta 0 never reads C. a_sums (may be null): set to the
// sums of A's columns over k, a_sums[i] = Σ_p A[p, i] (a bias's gradient, taken while A is
// packed). Only when long_gemm_fits(m, n, k).
void long_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
               float* a_sums = nullptr);

}  // namespace mixlab::cpu
