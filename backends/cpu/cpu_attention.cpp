// The attention core fused per (batch, head): scores, scale, mask, softmax and the weighted sum
// of the values in one pass over each (b, h), forward and backward (backends/kernels.def). At
// the end of the file, the synthesizers' core: the same softmax and weighted sum on given logits.
//
// Work: the (b, h) items are shared out over the pool (parallel_for), each item whole on one
// thread, so its reductions run in a fixed order and results repeat for a given thread count.
// This is what lets attention use both cores: the unfused path's [B·h] batches of tiny products
// and its row kernels are each too small to split well.
//
// Prefetch: while one item computes, the next item's operands (q, k, v, and out and dout in the
// backward) are asked into cache. A head's rows sit 1.5 KB apart in the [B, N, 3·d] projection,
// too far for the hardware prefetcher, and an item is too small to hide the misses itself: the
// translator's 12-token heads spent most of their time waiting; asked for, its attention calls
// take 25-30% less time (1 thread; 4-11% of the whole step). Prefetching the rows about to be
// written as well measured slower on the classifier and was left out. The bias's rows (the
// synthesizers' mixtures) are read the same way and asked for too: with a [B·N, h, 49] bias, an
// item of the classifier took 2 us longer forward and 3.5 us longer backward than without one,
// almost all of it waiting on memory (0.3 us with every operand in cache); asking for them takes
// 2-5% off an item (Zen 4, one thread, the core alone over the 512 items of one call).
//
// Memory: scores are formed one tile of query rows at a time, every key of those rows at once,
// in a buffer of the thread's own (at most kTileScores scores, reused call after call). For the
// sequences this project trains (6-128 tokens) a tile is the whole N×M block of one (b, h)
// (128 × 128 floats = 64 KiB, in L2), so each product is one cblas call of the full block and
// the softmax needs no running rescaling; longer sequences take several tiles of rows. Tiling
// the keys too (flash attention's online softmax) would bound the buffer for any length, but
// costs a rescaling pass per key tile and cuts the products into slivers OpenBLAS runs slower,
// for lengths this project does not train. Only out and each row's log-sum-exp are kept; the
// backward recomputes the probabilities from them, a tile at a time.
//
// Products: float32 items of at most 64 keys (the translator's 11-12 tokens, the classifier's
// 49) run in vector registers instead (attention_short_keys.cpp): a row of scores in up to four
// AVX-512 registers (eight AVX2 ones), no call per product, which beat cblas by 1.2-1.5x per call
// in the step (AVX2: 1.2-1.65x). Longer
// ones, float64 and masks strided along the keys use cblas on the per-(b, h) tiles below (plain
// compiler-vectorised loops had lost to cblas by 1.3x and 3x, docs/speed.md).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/attention_item.h"
#include "backends/cpu/simd/attention_short_keys.h"
#include "backends/cpu/simd/avx512_math.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/gemm_rows.h"
#include "backends/cpu/row_max.h"
#include "backends/kernel_products.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

// Scores per tile: 16,384 floats (64 KiB), the whole block up to 128 × 128.
constexpr int64_t kTileScores = 16384;

using cpu::gemm_rows;
using cpu::mask_rows;
using cpu::MaskRows;
using cpu::Mat;
using cpu::mat;
using cpu::prefetch_rows;
using cpu::probabilities_again;
using cpu::softmax_allowed;

// s [rows, m] = scale · q_tile kᵀ (zeros when the heads are empty, d == 0: no cblas call).
template <typename T>
void scores(int64_t rows, int64_t m, int64_t d, double scale, const T* q_tile, int64_t ldq,
            Mat<T> km, T* s) {
  if (d == 0)
    std::fill(s, s + rows * m, T(0));
  else
    gemm_rows(false, true, rows, m, d, scale, q_tile, ldq, km.data, km.ld, 0.0, s, m);
}

// The sizes of a call: items = B·H, n queries, m keys, widths d (q, k) and e (v), and the query
// rows per tile of scores (tile · max(m, 1) scores, the buffer's size).
struct Sizes {
  int64_t items, n, m, d, e, tile;
  size_t buffer() const { return static_cast<size_t>(tile * std::max<int64_t>(1, m)); }
};
Sizes sizes_of(const View& q, const View& k, const View& v) {
  int64_t n = q.shape[2], m = k.shape[2];
  int64_t tile =
      std::clamp<int64_t>(kTileScores / std::max<int64_t>(1, m), 1, std::max<int64_t>(1, n));
  return {q.shape[0] * q.shape[1], n, m, q.shape[3], v.shape[3], tile};
}

// The operands of one (b, h) item (item = b·H + h).
template <typename T>
struct Item {
  int64_t b, h;
  Mat<T> q, k, v, out;
  MaskRows<T> allowed;
  T* lse;  // its n rows' log-sum-exps
};
template <typename T>
Item<T> item_of(int64_t item, const View& q, const View& k, const View& v, const View& mask,
                const View& out, const View& lse) {
  int64_t b = item / q.shape[1], h = item % q.shape[1];
  return {b,
          h,
          mat<T>(q, b, h),
          mat<T>(k, b, h),
          mat<T>(v, b, h),
          mat<T>(out, b, h),
          mask_rows<T>(mask, b, h),
          lse.as<T>() + item * q.shape[2]};
}

template <typename T>
void zero_rows(Mat<T> x, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) std::fill(x.data + i * x.ld, x.data + i * x.ld + cols, T(0));
}

// p_row[j] ← P_ij (dP_ij − rowsum(dout_i ∘ out_i)) over the m keys: dS of a softmax row from its
// probabilities p_row, dP = dout vᵀ's row dp_row, and dout's and out's rows (e wide).
template <typename T>
void softmax_grad_row(T* p_row, const T* dp_row, const T* g_row, const T* o_row, int64_t m,
                      int64_t e) {
  T dot = 0;  // rowsum(dout ∘ out) = Σ_j P_ij dP_ij
  for (int64_t c = 0; c < e; ++c) dot += g_row[c] * o_row[c];
  for (int64_t j = 0; j < m; ++j) p_row[j] = p_row[j] * (dp_row[j] - dot);
}

// Item it's block of a bias (or of its gradient) broadcast to [B, H, N, M]; data null: none.
template <typename T>
Mat<T> bias_of(const View& bias, const Item<T>& it) {
  if (!bias.data) return {nullptr, 0};
  return mat<T>(bias, it.b, it.h);
}

// s's rows [i0, i0 + rows) (m wide) += the bias's rows (nothing without a bias).
template <typename T>
void add_bias(Mat<T> bias, int64_t i0, int64_t rows, int64_t m, T* s) {
  if (!bias.data) return;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = bias.data + (i0 + r) * bias.ld;
    for (int64_t j = 0; j < m; ++j) s[r * m + j] += row[j];
  }
}

// Rows [0, n) of src (m wide) copied into dst.
template <typename T>
void copy_rows(Mat<const T> src, int64_t n, int64_t m, Mat<T> dst) {
  for (int64_t i = 0; i < n; ++i)
    std::copy(src.data + i * src.ld, src.data + i * src.ld + m, dst.data + i * dst.ld);
}

}  // namespace

void CpuBackend::attention(const View& q, const View& k, const View& v, const View& mask,
                           const View& bias, double scale, const View& out, const View& lse) {
  const Sizes z = sizes_of(q, k, v);
  const int64_t n = z.n, m = z.m, d = z.d, e = z.e, tile = z.tile;
  dispatch_floating(q.dtype, "attention", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(z.items, 1, [&](int64_t begin, int64_t end) {
      kernel_products::ItemsSpan counted;  // MIXLAB_DEBUG: the products' share (kernel_products.h)
      T* s = cpu::thread_scratch<T>(0, z.buffer());
      for (int64_t item = begin; item < end; ++item) {
        Item<T> it = item_of<T>(item, q, k, v, mask, out, lse);
        Mat<T> qm = it.q, km = it.k, vm = it.v, om = it.out;
        T* row_lse = it.lse;
        const MaskRows<T>& allowed = it.allowed;
        const Mat<T> bm = bias_of<T>(bias, it);
        if (item + 1 < end) {
          Item<T> next = item_of<T>(item + 1, q, k, v, mask, out, lse);
          prefetch_rows(next.q, n, d);
          prefetch_rows(next.k, m, d);
          prefetch_rows(next.v, m, e);
          if (bias.data) prefetch_rows(bias_of<T>(bias, next), n, m);
        }
        if constexpr (std::is_same_v<T, float>)
          if (cpu::short_keys_fit(m, d, e, allowed)) {
            cpu::short_keys_forward(n, m, d, e, static_cast<float>(scale), {qm.data, qm.ld},
                                    {km.data, km.ld}, {vm.data, vm.ld}, allowed, {bm.data, bm.ld},
                                    om, row_lse);
            continue;
          }
        if (m == 0) {  // no keys: every row is empty
          zero_rows(om, n, e);
          std::fill(row_lse, row_lse + n, -std::numeric_limits<T>::infinity());
          continue;
        }
        for (int64_t i0 = 0; i0 < n; i0 += tile) {
          int64_t rows = std::min(tile, n - i0);
          scores(rows, m, d, scale, qm.data + i0 * qm.ld, qm.ld, km, s);
          add_bias(bm, i0, rows, m, s);
          for (int64_t r = 0; r < rows; ++r)
            row_lse[i0 + r] = softmax_allowed(s + r * m, m, allowed, i0 + r);
          if (e > 0)
            gemm_rows(false, false, rows, e, m, 1.0, s, m, vm.data, vm.ld, 0.0,
                      om.data + i0 * om.ld, om.ld);
        }
      }
    });
  });
}

void CpuBackend::attention_backward(const View& q, const View& k, const View& v, const View& mask,
                                    const View& bias, double scale, const View& out,
                                    const View& lse, const View& dout, const View& dq,
                                    const View& dk, const View& dv, const View& dbias) {
  const Sizes z = sizes_of(q, k, v);
  const int64_t n = z.n, m = z.m, d = z.d, e = z.e, tile = z.tile;
  dispatch_floating(q.dtype, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(z.items, 1, [&](int64_t begin, int64_t end) {
      kernel_products::ItemsSpan counted;  // MIXLAB_DEBUG: the products' share (kernel_products.h)
      T* p = cpu::thread_scratch<T>(0, z.buffer());   // probabilities, then dS
      T* dp = cpu::thread_scratch<T>(1, z.buffer());  // dout vᵀ
      for (int64_t item = begin; item < end; ++item) {
        Item<T> it = item_of<T>(item, q, k, v, mask, out, lse);
        Mat<T> qm = it.q, km = it.k, vm = it.v, om = it.out;
        const T* row_lse = it.lse;
        const MaskRows<T>& allowed = it.allowed;
        Mat<T> gm = mat<T>(dout, it.b, it.h), dqm = mat<T>(dq, it.b, it.h);
        Mat<T> dkm = mat<T>(dk, it.b, it.h), dvm = mat<T>(dv, it.b, it.h);
        const Mat<T> bm = bias_of<T>(bias, it), dbm = bias_of<T>(dbias, it);
        if (item + 1 < end) {
          Item<T> next = item_of<T>(item + 1, q, k, v, mask, out, lse);
          prefetch_rows(next.q, n, d);
          prefetch_rows(next.k, m, d);
          prefetch_rows(next.v, m, e);
          prefetch_rows(next.out, n, e);
          prefetch_rows(mat<T>(dout, next.b, next.h), n, e);
          if (bias.data) prefetch_rows(bias_of<T>(bias, next), n, m);
        }
        if constexpr (std::is_same_v<T, float>)
          if (n > 0 && cpu::short_keys_fit(m, d, e, allowed)) {
            cpu::short_keys_backward(n, m, d, e, static_cast<float>(scale), {qm.data, qm.ld},
                                     {km.data, km.ld}, {vm.data, vm.ld}, allowed, {bm.data, bm.ld},
                                     {om.data, om.ld}, row_lse, {gm.data, gm.ld}, dqm, dkm, dvm,
                                     dbm);
            continue;
          }
        if (n == 0 || m == 0) {  // no pairs: every gradient is 0
          zero_rows(dqm, n, d);
          zero_rows(dkm, m, d);
          zero_rows(dvm, m, e);
          if (dbm.data) zero_rows(dbm, n, m);
          continue;
        }
        for (int64_t i0 = 0; i0 < n; i0 += tile) {
          int64_t rows = std::min(tile, n - i0);
          // dk and dv sum over the tiles: the first one writes them (beta 0: no zeroing pass,
          // and OpenBLAS's small-matrix kernels take beta-0 products), the others add.
          double sum_beta = i0 == 0 ? 0.0 : 1.0;
          const T* q_tile = qm.data + i0 * qm.ld;
          const T* g_tile = gm.data + i0 * gm.ld;
          scores(rows, m, d, scale, q_tile, qm.ld, km, p);
          add_bias(bm, i0, rows, m, p);
          for (int64_t r = 0; r < rows; ++r)
            probabilities_again(p + r * m, m, allowed, i0 + r, row_lse[i0 + r]);
          if (e > 0) {
            gemm_rows(true, false, m, e, rows, 1.0, p, m, g_tile, gm.ld, sum_beta, dvm.data,
                      dvm.ld);
            gemm_rows(false, true, rows, m, e, 1.0, g_tile, gm.ld, vm.data, vm.ld, 0.0, dp, m);
          } else {
            std::fill(dp, dp + rows * m, T(0));
          }
          for (int64_t r = 0; r < rows; ++r)
            softmax_grad_row(p + r * m, dp + r * m, g_tile + r * gm.ld, om.data + (i0 + r) * om.ld,
                             m, e);
          if (dbm.data) copy_rows<T>({p, m}, rows, m, {dbm.data + i0 * dbm.ld, dbm.ld});  // dS
          if (d > 0) {
            gemm_rows(false, false, rows, d, m, scale, p, m, km.data, km.ld, 0.0,
                      dqm.data + i0 * dqm.ld, dqm.ld);
            gemm_rows(true, false, m, d, rows, scale, p, m, q_tile, qm.ld, sum_beta, dkm.data,
                      dkm.ld);
          }
        }
      }
    });
  });
}

}  // namespace mixlab

// ---- the synthesizers' core: the same softmax and weighted sum, the logits given ----
namespace mixlab {
namespace {

// The operands of one (b, h) item of the synthesized core (item = b·H + h).
template <typename T>
struct SynthItem {
  int64_t b, h;
  Mat<T> logits, v;
  MaskRows<T> allowed;
};
template <typename T>
SynthItem<T> synth_item_of(int64_t item, const View& logits, const View& v, const View& mask) {
  int64_t b = item / v.shape[1], h = item % v.shape[1];
  return {b, h, mat<T>(logits, b, h), mat<T>(v, b, h), mask_rows<T>(mask, b, h)};
}

}  // namespace

// The whole [n, m] block of an item at once (the logits are that size already, so a tile would
// bound nothing); float32 items of at most 64 keys take registers (attention_short_keys.cpp).
void CpuBackend::synthesized_attention(const View& logits, const View& v, const View& mask,
                                       const View& out, const View& lse) {
  const int64_t items = v.shape[0] * v.shape[1], n = logits.shape[2], m = logits.shape[3];
  const int64_t e = v.shape[3];
  dispatch_floating(v.dtype, "synthesized_attention", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(items, 1, [&](int64_t begin, int64_t end) {
      kernel_products::ItemsSpan counted;  // MIXLAB_DEBUG: the products' share (kernel_products.h)
      T* p = cpu::thread_scratch<T>(0, static_cast<size_t>(std::max<int64_t>(1, n * m)));
      for (int64_t item = begin; item < end; ++item) {
        SynthItem<T> it = synth_item_of<T>(item, logits, v, mask);
        Mat<T> om = mat<T>(out, it.b, it.h);
        T* row_lse = lse.as<T>() + item * n;
        if (item + 1 < end) {
          SynthItem<T> next = synth_item_of<T>(item + 1, logits, v, mask);
          prefetch_rows(next.logits, n, m);
          prefetch_rows(next.v, m, e);
        }
        if constexpr (std::is_same_v<T, float>)
          if (cpu::short_keys_fit(m, e, e, it.allowed)) {
            cpu::short_keys_synthesized_forward(n, m, e, {it.logits.data, it.logits.ld},
                                                {it.v.data, it.v.ld}, it.allowed, om, row_lse);
            continue;
          }
        if (m == 0) {  // no keys: every row is empty
          zero_rows(om, n, e);
          std::fill(row_lse, row_lse + n, -std::numeric_limits<T>::infinity());
          continue;
        }
        copy_rows<T>({it.logits.data, it.logits.ld}, n, m, {p, m});
        for (int64_t i = 0; i < n; ++i) row_lse[i] = softmax_allowed(p + i * m, m, it.allowed, i);
        if (e > 0)
          gemm_rows(false, false, n, e, m, 1.0, p, m, it.v.data, it.v.ld, 0.0, om.data, om.ld);
      }
    });
  });
}

void CpuBackend::synthesized_attention_backward(const View& logits, const View& v, const View& mask,
                                                const View& out, const View& lse, const View& dout,
                                                const View& dlogits, const View& dv) {
  const int64_t items = v.shape[0] * v.shape[1], n = logits.shape[2], m = logits.shape[3];
  const int64_t e = v.shape[3];
  dispatch_floating(v.dtype, "synthesized_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(items, 1, [&](int64_t begin, int64_t end) {
      kernel_products::ItemsSpan counted;  // MIXLAB_DEBUG: the products' share (kernel_products.h)
      T* dp = cpu::thread_scratch<T>(1, static_cast<size_t>(std::max<int64_t>(1, n * m)));
      for (int64_t item = begin; item < end; ++item) {
        SynthItem<T> it = synth_item_of<T>(item, logits, v, mask);
        Mat<T> om = mat<T>(out, it.b, it.h), gm = mat<T>(dout, it.b, it.h);
        Mat<T> dvm = mat<T>(dv, it.b, it.h);
        Mat<T> dl = mat<T>(dlogits, it.b, it.h);
        const T* row_lse = lse.as<T>() + item * n;
        if (item + 1 < end) {
          SynthItem<T> next = synth_item_of<T>(item + 1, logits, v, mask);
          prefetch_rows(next.logits, n, m);
          prefetch_rows(next.v, m, e);
          prefetch_rows(mat<T>(out, next.b, next.h), n, e);
          prefetch_rows(mat<T>(dout, next.b, next.h), n, e);
        }
        if constexpr (std::is_same_v<T, float>)
          if (n > 0 && cpu::short_keys_fit(m, e, e, it.allowed)) {
            cpu::short_keys_synthesized_backward(n, m, e, {it.logits.data, it.logits.ld},
                                                 {it.v.data, it.v.ld}, it.allowed, {om.data, om.ld},
                                                 row_lse, {gm.data, gm.ld}, dl, dvm);
            continue;
          }
        // P in dlogits' own rows, then dv = Pᵀ dout, dP = dout vᵀ, and dlogits = P ∘ (dP − dot).
        copy_rows<T>({it.logits.data, it.logits.ld}, n, m, dl);
        for (int64_t i = 0; i < n; ++i)
          probabilities_again(dl.data + i * dl.ld, m, it.allowed, i, row_lse[i]);
        if (n == 0 || m == 0 || e == 0) {
          zero_rows(dvm, m, e);
          zero_rows(dl, n, m);
          continue;
        }
        gemm_rows(true, false, m, e, n, 1.0, dl.data, dl.ld, gm.data, gm.ld, 0.0, dvm.data, dvm.ld);
        gemm_rows(false, true, n, m, e, 1.0, gm.data, gm.ld, it.v.data, it.v.ld, 0.0, dp, m);
        for (int64_t i = 0; i < n; ++i)
          softmax_grad_row(dl.data + i * dl.ld, dp + i * m, gm.data + i * gm.ld,
                           om.data + i * om.ld, m, e);
      }
    });
  });
}

}  // namespace mixlab
