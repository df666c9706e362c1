// A float32 product with few rows and a short inner axis, one item of a batch at a time:
// C = alpha·op(A)·op(B) + beta·C with m ≤ 64 and k ≤ 512, any n. These are the products of a
// mixer's token-by-token matrices (gMLP's spatial gate W·Z per example, the random and fixed
// synthesizers' softmax(R)·V per head, Linformer's projections E·K) and their gradients: hundreds
// of items of 49 × 49 × 256 or 49 × 49 × 32 a step. OpenBLAS packs both operands of every item
// and ran them at 30-55 GFLOP/s (bench_matmul); this kernel packs one panel of op(B) at a time
// into L1 and reads A's elements where they are (either layout). Each element of C is one chain
// of fused multiply-adds over k in order, so the thread count never changes a result.
#pragma once
#include <cstdint>

namespace mixlab::cpu {

// Whether short_gemm takes an [m, n] product over k: 6 ≤ m ≤ 64, 8 ≤ n, 1 ≤ k ≤ 512, and a build
// with AVX-512 or AVX2 (without, always false: OpenBLAS multiplies).
bool short_gemm_fits(int64_t m, int64_t n, int64_t k);

// C[m, n] (row stride ldc) = alpha · op(A) op(B) + beta · C on the calling thread. A is stored
// [m, k] (or [k, m] when trans_a), B [k, n] (or [n, k] when trans_b), with row strides lda and
// ldb. beta 0 never reads C. Only when short_gemm_fits(m, n, k).
void short_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                bool trans_a, const float* b, int64_t ldb, bool trans_b, float beta, float* c,
                int64_t ldc);

}  // namespace mixlab::cpu
