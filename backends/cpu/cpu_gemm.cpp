// Matrix products on OpenBLAS: one cblas_?gemm per batch item, transposes passed as flags.
#include <cblas.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/strided.h"

namespace mixlab {

void CpuBackend::gemm(const GemmArgs& g) {
  auto ta = g.trans_a ? CblasTrans : CblasNoTrans;
  auto tb = g.trans_b ? CblasTrans : CblasNoTrans;
  // Many small products (attention heads): run the batch over our threads with OpenBLAS kept
  // single-threaded inside; few large ones: let OpenBLAS thread each product.
  bool small = g.m * g.n * g.k < 64 * 64 * 64 && g.batch > 1;
  auto one = [&](int64_t i) {
    if (g.dtype == DType::F32) {
      cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, static_cast<float>(g.alpha),
                  static_cast<const float*>(g.a) + i * g.stride_a, g.lda,
                  static_cast<const float*>(g.b) + i * g.stride_b, g.ldb,
                  static_cast<float>(g.beta), static_cast<float*>(g.c) + i * g.stride_c, g.ldc);
    } else if (g.dtype == DType::F64) {
      cblas_dgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, g.alpha,
                  static_cast<const double*>(g.a) + i * g.stride_a, g.lda,
                  static_cast<const double*>(g.b) + i * g.stride_b, g.ldb, g.beta,
                  static_cast<double*>(g.c) + i * g.stride_c, g.ldc);
    } else {
      throw Error("gemm: unsupported dtype " + std::string(dtype_name(g.dtype)));
    }
  };
  if (small && num_threads() > 1) {
    int threads = num_threads();
    openblas_set_num_threads(1);
    parallel_for(g.batch, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) one(i);
    });
    openblas_set_num_threads(threads);
  } else {
    for (int64_t i = 0; i < g.batch; ++i) one(i);
  }
}

}  // namespace mixlab
