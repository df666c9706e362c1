// Matrix products on OpenBLAS: one cblas_?gemm per batch item (or per block of one), transposes
// passed as flags.
//
// Threads: OpenBLAS runs single-threaded (set when the CPU backend is made, below) and the engine's
// pool splits the work, because OpenBLAS's own threads keep the default float modes and crawl on
// subnormals (core/float_env.h). Many small products (attention heads) are shared out whole; a
// large one is cut into blocks of rows of C (or of columns, when C is wide and short). A product
// with a small C and a long inner dimension (a weight's gradient: d × d' summed over every token)
// is cut along k instead: each thread multiplies its slice of k into a partial C of its own and
// the partials are added in a fixed order (row_partials.h, as the bias gradients' sums). Cut by
// rows there, each thread would reread the whole of the other operand for a thin block of C. The
// blocks depend only on the shape and the thread count, so results repeat bit for bit for a given
// thread count; a different count can round differently (OpenBLAS picks its kernels by block shape,
// and a split k sums in another order). Products summed over a grid's outer level (a shared
// operand's gradient, gemm_sums_outer) are shared out by inner index, each summed in order by
// one thread.
//
// A tall float32 product with a short inner axis (a linear layer's forward or input gradient)
// goes to tall_gemm.h instead, which beats OpenBLAS there by not packing A; a block of a weight's
// gradient (A transposed, a long k, a small C) goes to long_gemm.h, which beats it by packing
// a chunk of k at a time in memory order. An item with few rows and a short k (a mixer's
// token-by-token matrices, in their hundreds a step) goes to short_gemm.h, which packs one panel
// of op(B) at a time where OpenBLAS packs both operands of every item.
//
// gemm_epilogue (a linear layer's bias, bias + GELU or GELU's gradient on the product's output):
// on the tall kernel the pass runs on each 6-row block of C as soon as it is computed, while it
// is in L1; elsewhere OpenBLAS multiplies and the pass follows over C's rows. RowSums (a weight's
// gradient with its bias's, the sums of op(A)'s rows): the long kernel adds A's rows up as it
// packs them; on OpenBLAS a transposed A is summed a slice of k at a time just before each
// slice's product (kSumSlice); the other paths sum each block's rows after its product.
#include <cblas.h>

#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/epilogue_row.h"
#include "backends/cpu/simd/long_gemm.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/row_partials.h"
#include "backends/cpu/simd/short_gemm.h"
#include "backends/cpu/simd/tall_gemm.h"
#include "core/dtype_dispatch.h"
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
// A product is split along k when k is at least kSplitKRatio times C's larger side and C has at
// most kMaxSplitKOutput elements (the partials' memory, and the pass that adds them). Measured on
// 2 threads against the split of C, interleaved, best of 20 (AVX-512 Xeon, OpenBLAS SkylakeX):
// 128x6272 @ 6272x128 1.52-1.56x → 1.85-1.86x of one thread's speed, 128x6272 @ 6272x512
// 1.68-1.74x → 1.93-1.94x, 128x1536 @ 1536x128 1.49-1.61x → 1.66-1.76x; at k = 3·512
// (512x1536 @ 1536x128) neither split won, hence the ratio.
constexpr int64_t kSplitKRatio = 8;
constexpr int64_t kMaxSplitKOutput = 512 * 512;

// One block of batch item i's product: C[r0..r1, c0..c1] over the inner indices k0..k1. The
// block is written to `out` (row stride ldo) with `beta`; out null: into C itself, with g.beta.
struct Block {
  int64_t r0, r1, c0, c1, k0, k1;
  void* out = nullptr;
  int64_t ldo = 0;
  double beta = 0.0;
  void* row_sums = nullptr;  // set: written with op(A)'s rows [r0, r1) summed over [k0, k1)
};

// sums[r - r0] = Σ_{k0 ≤ k < k1} op(A)[r, k] for the block's rows, k in order (the pass for
// products whose kernel does not take the sums on the way).
template <typename T>
void add_row_sums_of_a(const GemmArgs& g, int64_t i, const Block& blk, T* sums) {
  const T* a = static_cast<const T*>(g.a) + gemm_item_offset(g, i, g.stride_a, g.outer_stride_a);
  const int64_t rows = blk.r1 - blk.r0;
  if (g.trans_a) {  // A stored [k, m]: add its rows
    for (int64_t k = blk.k0; k < blk.k1; ++k)
      for (int64_t r = 0; r < rows; ++r) sums[r] += a[k * g.lda + blk.r0 + r];
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = blk.k0; k < blk.k1; ++k) sums[r] += a[(blk.r0 + r) * g.lda + k];
  }
}

template <typename T>
void row_sums_of_a(const GemmArgs& g, int64_t i, const Block& blk, T* sums) {
  std::fill_n(sums, blk.r1 - blk.r0, T(0));
  add_row_sums_of_a(g, i, blk, sums);
}

// With A stored transposed ([k, m]: a weight's gradient dYᵀX, dY read down its columns), the
// sums of op(A)'s rows were a pass over all of A after the product, which read A from memory a
// second time: the classifier's dW₁ (512 × 6272 tokens × 128) took 12.2-12.7 ms alone and
// 14.5-15.0 with its bias's sums (1 thread), 6.4-7.0 and 7.8-10.0 ms (2 threads; AVX2 EPYC,
// OpenBLAS's Zen kernels). Cut into slices of kSumSlice steps of k, each slice summed just
// before OpenBLAS multiplies it (the product then reads it from cache), the pair took 11.6-12.5
// and 6.2-6.3 ms: less than the product alone. Slices of 128 to 1024 steps did as well; the
// products' extra passes over C (at most 512 × 512 here) cost less than they save.
constexpr int64_t kSumSlice = 256;

void gemm_block(const GemmArgs& g, int64_t i, const Block& blk) {
  auto ta = g.trans_a ? CblasTrans : CblasNoTrans;
  auto tb = g.trans_b ? CblasTrans : CblasNoTrans;
  // Element (r, k) of op(A) is at r*lda + k (stored as is) or at k*lda + r (stored transposed);
  // element (k, c) of op(B) at k*ldb + c (as is) or at c*ldb + k (transposed).
  int64_t a_off = gemm_item_offset(g, i, g.stride_a, g.outer_stride_a) +
                  (g.trans_a ? blk.k0 * g.lda + blk.r0 : blk.r0 * g.lda + blk.k0);
  int64_t b_off = gemm_item_offset(g, i, g.stride_b, g.outer_stride_b) +
                  (g.trans_b ? blk.c0 * g.ldb + blk.k0 : blk.k0 * g.ldb + blk.c0);
  int64_t c_off = gemm_item_offset(g, i, g.stride_c, g.outer_stride_c) + blk.r0 * g.ldc + blk.c0;
  int64_t m = blk.r1 - blk.r0, n = blk.c1 - blk.c0, k = blk.k1 - blk.k0;
  int64_t ldo = blk.out ? blk.ldo : g.ldc;
  double beta = blk.out ? blk.beta : g.beta;
  if (g.dtype == DType::F32) {
    float* out = blk.out ? static_cast<float*>(blk.out) : static_cast<float*>(g.c) + c_off;
    float* sums = static_cast<float*>(blk.row_sums);
    if (g.trans_a && !g.trans_b && cpu::long_gemm_fits(m, n, k)) {  // a weight's gradient
      cpu::long_gemm(m, n, k, static_cast<float>(g.alpha), static_cast<const float*>(g.a) + a_off,
                     g.lda, static_cast<const float*>(g.b) + b_off, g.ldb, static_cast<float>(beta),
                     out, ldo, sums);
      return;
    }
    // Decided on the item's shape, not the block's: a block of it then gives the same bits.
    if (cpu::short_gemm_fits(g.m, g.n, g.k)) {  // a mixer's per-example token-by-token product
      cpu::short_gemm(m, n, k, static_cast<float>(g.alpha), static_cast<const float*>(g.a) + a_off,
                      g.lda, g.trans_a, static_cast<const float*>(g.b) + b_off, g.ldb, g.trans_b,
                      static_cast<float>(beta), out, ldo);
      if (sums) row_sums_of_a(g, i, blk, sums);
      return;
    }
    if (sums && g.trans_a && k > kSumSlice) {  // each slice summed, then multiplied from cache
      std::fill_n(sums, m, 0.0f);
      for (int64_t p0 = blk.k0; p0 < blk.k1; p0 += kSumSlice) {
        Block slice = blk;
        slice.k0 = p0, slice.k1 = std::min(p0 + kSumSlice, blk.k1);
        add_row_sums_of_a(g, i, slice, sums);
        slice.row_sums = nullptr;
        slice.out = out, slice.ldo = ldo, slice.beta = p0 == blk.k0 ? beta : 1.0;
        gemm_block(g, i, slice);
      }
      return;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(g.alpha),
                static_cast<const float*>(g.a) + a_off, g.lda,
                static_cast<const float*>(g.b) + b_off, g.ldb, static_cast<float>(beta), out, ldo);
    if (sums) row_sums_of_a(g, i, blk, sums);
  } else if (g.dtype == DType::F64) {
    double* out = blk.out ? static_cast<double*>(blk.out) : static_cast<double*>(g.c) + c_off;
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, g.alpha, static_cast<const double*>(g.a) + a_off,
                g.lda, static_cast<const double*>(g.b) + b_off, g.ldb, beta, out, ldo);
    if (blk.row_sums) row_sums_of_a(g, i, blk, static_cast<double*>(blk.row_sums));
  } else {
    throw Error("gemm: unsupported dtype " + std::string(dtype_name(g.dtype)));
  }
}

// Asks item i's operands that change from item to item (A's, B's: with a stride of their own)
// into L2 (prefetcht1) while the item before it computes. The mixers' per-example and per-head
// products read their rows out of [B, N, d] tensors (a head's 128 bytes of every 512-byte row),
// a pattern the hardware prefetcher does not follow, and an item (a few microseconds) is too
// short to hide its own misses. In the classifier's step (d = 128, 49 tokens, medians per call)
// asking for them takes 20-40% off the synthesizers' dR = Σ_b dY Vᵀ and 10-15% off gMLP's W Z
// and Σ_b dY Zᵀ. Prefetching the rows of C to be written as well (prefetchw) gained nothing more.
// An operand of more than kMaxPrefetchBytes (a large item summed over the outer level) is left
// to the hardware: brought in whole, it would push the current item's operands out of L2.
constexpr int64_t kMaxPrefetchBytes = 256 * 1024;

void prefetch_item(const GemmArgs& g, int64_t i) {
  const int64_t elem = g.dtype == DType::F64 ? 8 : 4;
  auto rows = [&](const void* base, int64_t offset, int64_t count, int64_t width, int64_t ld) {
    if (count * width * elem > kMaxPrefetchBytes) return;
    const char* p = static_cast<const char*>(base) + offset * elem;
    for (int64_t r = 0; r < count; ++r)
      for (int64_t c = 0; c < width * elem; c += 64)
        __builtin_prefetch(p + r * ld * elem + c, 0, 2);
  };
  if (g.stride_a != 0 || g.outer_stride_a != 0)
    rows(g.a, gemm_item_offset(g, i, g.stride_a, g.outer_stride_a), g.trans_a ? g.k : g.m,
         g.trans_a ? g.m : g.k, g.lda);
  if (g.stride_b != 0 || g.outer_stride_b != 0)
    rows(g.b, gemm_item_offset(g, i, g.stride_b, g.outer_stride_b), g.trans_b ? g.n : g.k,
         g.trans_b ? g.k : g.n, g.ldb);
}

Block whole(const GemmArgs& g) { return {0, g.m, 0, g.n, 0, g.k}; }

bool split_along_k(const GemmArgs& g, int threads) {
  return threads > 1 && g.m * g.n <= kMaxSplitKOutput && g.k >= kSplitKRatio * std::max(g.m, g.n) &&
         g.k >= 2 * kMinBlock * threads;
}

// C = beta·C + the partials' sums, for `count` matrices of C (g.stride_c apart) whose [m, n]
// elements lie in the partial rows one matrix after another: the last pass of a product split
// into partial sums (along k, or over a grid's outer items).
template <typename T>
void store_partials(const GemmArgs& g, T* c, int64_t count, const cpu::RowPartials<T>& sums) {
  const T beta = static_cast<T>(g.beta);
  parallel_for(count * g.m, kMinBlock, [&](int64_t r0, int64_t r1) {
    thread_local std::vector<T> totals;
    if (beta != T(0)) totals.resize(static_cast<size_t>(g.n));
    for (int64_t r = r0; r < r1; ++r) {  // row r % m of matrix r / m
      T* c_row = c + (r / g.m) * g.stride_c + (r % g.m) * g.ldc;
      if (beta == T(0)) {  // C is not read
        sums.sum_columns(r * g.n, g.n, c_row);
        continue;
      }
      sums.sum_columns(r * g.n, g.n, totals.data());
      for (int64_t j = 0; j < g.n; ++j) c_row[j] = beta * c_row[j] + totals[j];
    }
  });
}

// Batch item i split along k: one slice of k per thread, each multiplied into its own partial C
// (row_partials.h: the calling thread's buffer, one row of m·n per chunk, and m more for the
// slice's row sums of op(A) when row_sums is set), then C = beta·C + the partials (and the row
// sums), added in chunk order.
template <typename T>
void gemm_split_k(const GemmArgs& g, int64_t i, T* row_sums) {
  const int64_t width = g.m * g.n + (row_sums ? g.m : 0);
  auto sums = cpu::accumulate_row_chunks<T>(g.k, width, [&](int64_t k0, int64_t k1, T* part) {
    Block blk = whole(g);
    blk.k0 = k0, blk.k1 = k1;
    blk.out = part, blk.ldo = g.n;  // beta 0: the slice's product alone
    if (row_sums) blk.row_sums = part + g.m * g.n;
    gemm_block(g, i, blk);
  });
  if (row_sums)
    for (int64_t r = 0; r < g.m; ++r) row_sums[r] = sums.column(g.m * g.n + r);
  store_partials(g, static_cast<T*>(g.c) + gemm_item_offset(g, i, g.stride_c, g.outer_stride_c), 1,
                 sums);
}

// A grid summed over its outer level (gemm_sums_outer): C_i = alpha Σ_o A_(o,i) B_(o,i) + beta C_i.
// With at least kSumChunks inner indices, each one's items are added in order by one thread.
// With fewer (a weight shared by every example: one inner index), the outer items are cut into
// kSumChunks chunks, each summed into a partial C of its own, and the partials are added in
// chunk order (row_partials.h). Either way the order depends only on the shape: the same bits
// for any thread count.
constexpr int64_t kSumChunks = 4;

template <typename T>
void gemm_sum_outer(const GemmArgs& g) {
  const int64_t outer = g.batch / g.inner, items = g.m * g.n;
  // Item (o, i)'s product into `out` (row stride ldo) with `beta` (1: added to what is there).
  auto multiply = [&](int64_t o, int64_t i, T* out, int64_t ldo, double beta) {
    Block blk = whole(g);
    blk.out = out, blk.ldo = ldo, blk.beta = beta;
    gemm_block(g, o * g.inner + i, blk);
  };
  T* c = static_cast<T*>(g.c);
  if (g.inner >= kSumChunks) {  // (gemm_sums_outer: at least two outer items)
    // Outer items in the outer loop: a grid's items of one outer index (heads side by side in a
    // row) share cache lines, which are then read once for all of a thread's inner indices, not
    // once per index (the random synthesizer's dR over 4 heads, in the classifier's step: 2.48
    // -> 2.25 ms). Each C_i still adds its items in outer order.
    parallel_for(g.inner, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = i0; i < i1; ++i) {
          if (i + 1 < i1)
            prefetch_item(g, o * g.inner + i + 1);
          else if (o + 1 < outer)
            prefetch_item(g, (o + 1) * g.inner + i0);
          multiply(o, i, c + i * g.stride_c, g.ldc, o == 0 ? g.beta : 1.0);
        }
    });
    return;
  }
  auto sums = cpu::accumulate_row_blocks<T>(
      outer, g.inner * items, kSumChunks, [&](int64_t o0, int64_t o1, T* part) {
        for (int64_t i = 0; i < g.inner; ++i)
          for (int64_t o = o0; o < o1; ++o) {
            if (o + 1 < o1) prefetch_item(g, (o + 1) * g.inner + i);
            multiply(o, i, part + i * items, g.n, o == o0 ? 0.0 : 1.0);
          }
      });
  store_partials(g, c, g.inner, sums);
}

}  // namespace

// OpenBLAS's own threads are started when the library loads and keep the default float modes,
// so they would run on subnormals at microcode speed (core/float_env.h). Products are split over
// the engine's pool instead (core/parallel.h); OpenBLAS stays on one thread. Every product goes
// through this backend, so setting it here, before the first one, is enough.
CpuBackend::CpuBackend() { openblas_set_num_threads(1); }

namespace {

// The product, split over the pool. row_sums (batch 1 only; may be null): written with the sums
// of op(A)'s rows, each taken by the block that reads those rows where its kernel can.
void run_gemm(const GemmArgs& g, void* row_sums) {
  ScopedFlushDenormals flush;   // for the products that run on this thread
  int threads = num_threads();  // first use also pins OpenBLAS to one thread (core/parallel.cpp)
  bool small = g.m * g.n * g.k < kSplitMacs;
  const size_t elem = g.dtype == DType::F64 ? sizeof(double) : sizeof(float);
  auto sums_from = [&](int64_t r0) {
    return row_sums ? static_cast<char*>(row_sums) + r0 * elem : nullptr;
  };
  if (gemm_sums_outer(g)) {
    if (g.dtype == DType::F64)
      gemm_sum_outer<double>(g);
    else
      gemm_sum_outer<float>(g);
    return;
  }
  if (small && g.batch > 1) {
    parallel_for(g.batch, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (i + 1 < e) prefetch_item(g, i + 1);
        gemm_block(g, i, whole(g));
      }
    });
    return;
  }
  const bool tall = cpu::tall_gemm_fits(g);
  for (int64_t i = 0; i < g.batch; ++i) {
    if (tall) {
      cpu::tall_gemm(g, i);
      // The tall kernel (float32 only) reads A's rows in place; a pass of their own sums them.
      if (row_sums) row_sums_of_a(g, i, whole(g), static_cast<float*>(row_sums));
    } else if (small || threads == 1) {
      Block blk = whole(g);
      blk.row_sums = row_sums;
      gemm_block(g, i, blk);
    } else if (split_along_k(g, threads)) {
      if (g.dtype == DType::F64)
        gemm_split_k<double>(g, i, static_cast<double*>(row_sums));
      else
        gemm_split_k<float>(g, i, static_cast<float*>(row_sums));
    } else if (g.m >= g.n) {
      parallel_for(g.m, kMinBlock, [&](int64_t r0, int64_t r1) {
        Block blk = whole(g);
        blk.r0 = r0, blk.r1 = r1;
        blk.row_sums = sums_from(r0);
        gemm_block(g, i, blk);
      });
    } else {
      parallel_for(g.n, kMinBlock, [&](int64_t c0, int64_t c1) {
        Block blk = whole(g);
        blk.c0 = c0, blk.c1 = c1;
        if (c0 == 0) blk.row_sums = row_sums;  // every block reads all rows: one sums them
        gemm_block(g, i, blk);
      });
    }
  }
}

}  // namespace

void CpuBackend::gemm(const GemmArgs& g) { run_gemm(g, nullptr); }

void CpuBackend::gemm_epilogue(const GemmArgs& g, GemmEpilogue epilogue, const View& bias,
                               const View& aux) {
  check(g.batch == 1 && (g.m <= 1 || g.ldc == g.n), "gemm_epilogue: C must be one contiguous [",
        g.m, ", ", g.n, "] matrix (batch ", g.batch, ", ldc ", g.ldc, ")");
  if (epilogue == GemmEpilogue::RowSums) {  // the sums come with the product's read of A
    run_gemm(g, aux.data);
    return;
  }
  if (cpu::tall_gemm_fits(g)) {  // the pass runs on each block of rows as it is computed
    ScopedFlushDenormals flush;
    const cpu::TallEpilogue e{epilogue, bias.as<float>(), aux.as<float>()};
    cpu::tall_gemm(g, 0, &e);
    return;
  }
  gemm(g);  // OpenBLAS, then the pass over C's rows
  dispatch_floating(g.dtype, "gemm_epilogue", [&](auto tag) {
    using T = decltype(tag);
    T* c = static_cast<T*>(g.c);
    const int64_t n = g.n;
    parallel_for(g.m, cpu::rows_per_task(n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        cpu::epilogue_row(epilogue, c + r * n, bias.as<T>(),
                          aux.data ? aux.as<T>() + r * n : nullptr, n);
    });
  });
}

}  // namespace mixlab
