// One product on the calling thread, straight to cblas, for kernels that already run inside the
// pool's split (the attention cores' per-item tiles, fft2_real's token axis): C = alpha op(A)
// op(B) + beta C, row-major. The engine's own split and product kernels are cpu_gemm.cpp's.
// Each call's time counts as products in MIXLAB_DEBUG's table of fused kernels
// (kernel_products.h).
#pragma once
#include <cblas.h>

#include <cstdint>

#include "backends/kernel_products.h"

namespace mixlab::cpu {

inline void gemm_rows(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, double beta,
                      float* c, int64_t ldc) {
  kernel_products::ProductSpan product;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, static_cast<float>(alpha), a, lda, b, ldb, static_cast<float>(beta), c, ldc);
}
inline void gemm_rows(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                      const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                      double* c, int64_t ldc) {
  kernel_products::ProductSpan product;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace mixlab::cpu
