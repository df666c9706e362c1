// Matrix products on cuBLAS. The engine's matrices are row-major; cuBLAS is column-major, and a
// row-major matrix read column-major is its transpose. So C = op(A) op(B) (row-major) is computed
// as Cᵀ = op(B)ᵀ op(A)ᵀ (column-major): swap the operands and m with n, keep each operand's
// transpose flag. One cublas?gemmStridedBatched call per product (per outer item of a two-level
// grid); a batch stride of 0 reuses the same matrix for every item (broadcast). Reference:
// backends/cpu/cpu_gemm.cpp.
#include <algorithm>
#include <climits>

#include "backends/cuda/common.cuh"

namespace mixlab {

void CudaBackend::gemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  check(g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX && g.lda <= INT_MAX &&
            g.ldb <= INT_MAX && g.ldc <= INT_MAX && g.batch <= INT_MAX,
        "cuda gemm: sizes exceed cuBLAS's 32-bit limits (m=", g.m, " n=", g.n, " k=", g.k,
        " batch=", g.batch, ")");
  activate();
  cublasHandle_t handle = cublas();
  cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  int lda = static_cast<int>(g.lda), ldb = static_cast<int>(g.ldb), ldc = static_cast<int>(g.ldc);
  if (k == 0) {
    // Nothing of A or B is read (C = beta C): any leading dimension cuBLAS accepts will do.
    lda = std::max(lda, g.trans_a ? m : 1);
    ldb = std::max(ldb, g.trans_b ? 1 : n);
  }
  // A two-level grid (GemmArgs::inner) is one strided-batched call per outer item. Summed over
  // the outer level (gemm_sums_outer), each call after the first adds to C: in outer order, on
  // one stream.
  int64_t per_call = g.inner > 0 ? std::min(g.inner, g.batch) : g.batch;
  const bool sums = gemm_sums_outer(g);
  for (int64_t first = 0; first < g.batch; first += per_call) {
    int batch = static_cast<int>(std::min(per_call, g.batch - first));
    int64_t a_off = gemm_item_offset(g, first, g.stride_a, g.outer_stride_a);
    int64_t b_off = gemm_item_offset(g, first, g.stride_b, g.outer_stride_b);
    int64_t c_off = gemm_item_offset(g, first, g.stride_c, g.outer_stride_c);
    const double beta_now = sums && first > 0 ? 1.0 : g.beta;
    if (g.dtype == DType::F32) {
      float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(beta_now);
      MIXLAB_CUBLAS_CHECK(cublasSgemmStridedBatched(
          handle, op_b, op_a, n, m, k, &alpha, static_cast<const float*>(g.b) + b_off, ldb,
          g.stride_b, static_cast<const float*>(g.a) + a_off, lda, g.stride_a, &beta,
          static_cast<float*>(g.c) + c_off, ldc, g.stride_c, batch));
    } else if (g.dtype == DType::F64) {
      double alpha = g.alpha, beta = beta_now;
      MIXLAB_CUBLAS_CHECK(cublasDgemmStridedBatched(
          handle, op_b, op_a, n, m, k, &alpha, static_cast<const double*>(g.b) + b_off, ldb,
          g.stride_b, static_cast<const double*>(g.a) + a_off, lda, g.stride_a, &beta,
          static_cast<double*>(g.c) + c_off, ldc, g.stride_c, batch));
    } else {
      fail("cuda gemm: unsupported dtype ", dtype_name(g.dtype));
    }
  }
}

}  // namespace mixlab
