// Matrix products on OpenBLAS: one cblas_?gemm per batch item (or per block of one), transposes
// passed as flags.
//
// Threads: OpenBLAS runs single-threaded (set when the CPU backend is made, below) and the engine's
// pool splits the work, because OpenBLAS's own threads keep the default float modes and crawl on
// subnormals (core/float_env.h). Many small products (attention heads) are shared out whole; a
// large one is cut into blocks of rows of C (or of columns, when C is wide and short). The blocks
// depend only on the shape and the thread count, so results repeat bit for bit for a given thread
// count; a different count can round differently (OpenBLAS picks its kernels by block shape).
#include <cblas.h>

#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/float_env.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

// Below this many multiply-adds a product is not worth splitting: waking the pool costs more
// than it saves (bench_matmul, 2 threads: a split 64^3 product took 8.7 us, unsplit 4.5 us).
constexpr int64_t kSplitMacs = 96 * 96 * 96;
// Blocks are at least this many rows (or columns) so each stays a good shape for the kernel.
constexpr int64_t kMinBlock = 32;

// C[rows r0..r1, cols c0..c1] of batch item i.
void gemm_block(const GemmArgs& g, int64_t i, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  auto ta = g.trans_a ? CblasTrans : CblasNoTrans;
  auto tb = g.trans_b ? CblasTrans : CblasNoTrans;
  // Row r of op(A) starts at r*lda (stored as is) or at column r (stored transposed); column c
  // of op(B) at column c (as is) or at row c (transposed).
  int64_t a_off =
      gemm_item_offset(g, i, g.stride_a, g.outer_stride_a) + (g.trans_a ? r0 : r0 * g.lda);
  int64_t b_off =
      gemm_item_offset(g, i, g.stride_b, g.outer_stride_b) + (g.trans_b ? c0 * g.ldb : c0);
  int64_t c_off = gemm_item_offset(g, i, g.stride_c, g.outer_stride_c) + r0 * g.ldc + c0;
  int64_t m = r1 - r0, n = c1 - c0;
  if (g.dtype == DType::F32) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, g.k, static_cast<float>(g.alpha),
                static_cast<const float*>(g.a) + a_off, g.lda,
                static_cast<const float*>(g.b) + b_off, g.ldb, static_cast<float>(g.beta),
                static_cast<float*>(g.c) + c_off, g.ldc);
  } else if (g.dtype == DType::F64) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, g.k, g.alpha, static_cast<const double*>(g.a) + a_off,
                g.lda, static_cast<const double*>(g.b) + b_off, g.ldb, g.beta,
                static_cast<double*>(g.c) + c_off, g.ldc);
  } else {
    throw Error("gemm: unsupported dtype " + std::string(dtype_name(g.dtype)));
  }
}

}  // namespace

// OpenBLAS's own threads are started when the library loads and keep the default float modes,
// so they would run on subnormals at microcode speed (core/float_env.h). Products are split over
// the engine's pool instead (core/parallel.h); OpenBLAS stays on one thread. Every product goes
// through this backend, so setting it here, before the first one, is enough.
CpuBackend::CpuBackend() { openblas_set_num_threads(1); }

void CpuBackend::gemm(const GemmArgs& g) {
  ScopedFlushDenormals flush;   // for the products that run on this thread
  int threads = num_threads();  // first use also pins OpenBLAS to one thread (core/parallel.cpp)
  bool small = g.m * g.n * g.k < kSplitMacs;
  if (small && g.batch > 1) {
    parallel_for(g.batch, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) gemm_block(g, i, 0, g.m, 0, g.n);
    });
    return;
  }
  for (int64_t i = 0; i < g.batch; ++i) {
    if (small || threads == 1) {
      gemm_block(g, i, 0, g.m, 0, g.n);
    } else if (g.m >= g.n) {
      parallel_for(g.m, kMinBlock,
                   [&](int64_t r0, int64_t r1) { gemm_block(g, i, r0, r1, 0, g.n); });
    } else {
      parallel_for(g.n, kMinBlock,
                   [&](int64_t c0, int64_t c1) { gemm_block(g, i, 0, g.m, c0, c1); });
    }
  }
}

}  // namespace mixlab
