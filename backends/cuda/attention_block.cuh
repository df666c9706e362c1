// The attention core with one thread block per (batch, head) and the whole head in shared
// memory: q, k and v (and, backward, dout) are read from global memory once, the scores,
// probabilities and their gradients never leave the chip, and every product runs from shared
// memory. Used by attention.cu whenever a head fits (attention_block_fits); longer heads take
// the row kernels there. Included by attention.cu only.
//
// Each sum runs in the same order as in the row kernels (a warp per query row for the scores
// and softmax, lanes striding over the keys; sums over keys or queries from first to last for
// the products), so both paths give the same bits and the choice between them is invisible.
// Rows of k and v are padded by one element in shared memory: the lanes of a warp read
// different rows at the same column, which would otherwise fall in one memory bank.
#pragma once
#include "backends/cuda/common.cuh"

namespace mixlab::cuda {

// The mask broadcast to [B, H, N, M]; data null: every key allowed.
template <typename T>
struct HeadMask {
  const T* data;
  int64_t s0, s1, s2, s3, heads;
  __device__ __forceinline__ bool allowed(int64_t item, int64_t i, int64_t j) const {
    if (!data) return true;
    return data[(item / heads) * s0 + (item % heads) * s1 + i * s2 + j * s3] != T(0);
  }
};
template <typename T>
HeadMask<T> head_mask(const View& mask, int64_t heads) {
  return {mask.as<T>(), mask.strides[0], mask.strides[1], mask.strides[2], mask.strides[3], heads};
}

// A bias (or its gradient) as rows; data null: none.
template <typename T>
HeadRows<T> optional_rows(const View& view, int64_t heads) {
  if (!view.data) return {nullptr, 0, 0, 0, heads};
  return head_rows<T>(view);
}

template <typename T>
__device__ __forceinline__ T dot(const T* a, const T* b, int64_t n) {
  T acc = 0;
  for (int64_t c = 0; c < n; ++c) acc += a[c] * b[c];
  return acc;
}

// One head's sizes and operands. Dot-product attention has q and k (scores scale·q kᵀ + bias);
// the synthesizers give their logits instead (q.data null).
template <typename T>
struct BlockHead {
  HeadRows<const T> q, k, v;  // q.data null: the scores are `logits`
  HeadRows<const T> logits;   // the synthesizers' (stride 0 on a broadcast batch axis)
  HeadRows<const T> bias;     // data null: none
  HeadMask<T> mask;
  T scale;
  int n, m, d, e;
  __host__ __device__ bool given() const { return q.data == nullptr; }
};

// Where each array of a head lives in the block's shared memory, in elements of T.
struct BlockLayout {
  int q, k, v, g, p, ds, end;  // offsets; g: dout (backward)
  int kd, ve;                  // padded row lengths of k and v
};
inline BlockLayout block_layout(int n, int m, int d, int e, bool given, bool backward) {
  BlockLayout l{};
  l.kd = d + 1;
  l.ve = e + 1;
  int at = 0;
  l.q = at;
  if (!given) at += n * d;
  l.k = at;
  if (!given) at += m * l.kd;
  l.v = at;
  at += m * l.ve;
  l.g = at;
  if (backward) at += n * e;
  l.p = at;
  at += n * m;
  l.ds = at;
  if (backward) at += n * m;
  l.end = at;
  return l;
}

// Copies `rows` rows of `cols` elements from a head's strided rows into shared memory rows of
// `ld` elements, the whole block sharing the work (consecutive threads: consecutive elements).
template <typename T>
__device__ __forceinline__ void load_rows(T* dst, int ld, HeadRows<const T> src, int64_t item,
                                          int rows, int cols) {
  for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
    int r = idx / cols, c = idx % cols;
    dst[r * ld + c] = src.row(item, r)[c];
  }
}

// q and k (for dot-product scores) and v of one head into shared memory.
template <typename T>
__device__ __forceinline__ void load_head(const BlockHead<T>& h, const BlockLayout& l, T* smem,
                                          int64_t item) {
  if (!h.given()) {
    load_rows(smem + l.q, h.d, h.q, item, h.n, h.d);
    load_rows(smem + l.k, l.kd, h.k, item, h.m, h.d);
  }
  load_rows(smem + l.v, l.ve, h.v, item, h.m, h.e);
}

// Score (i, j) from shared memory: as the row kernels' DotScores and GivenScores.
template <typename T>
__device__ __forceinline__ T block_score(const BlockHead<T>& h, const BlockLayout& l, const T* smem,
                                         int64_t item, int i, int j) {
  if (h.given()) return h.logits.row(item, i)[j];
  T s = d_mul_rounded(h.scale, dot(smem + l.q + i * h.d, smem + l.k + j * l.kd, int64_t(h.d)));
  return h.bias.data ? s + h.bias.row(item, i)[j] : s;
}

// Forward: P = masked softmax of the scores (a warp per row), lse, then out = P v.
template <typename T>
__global__ void attention_block_kernel(BlockHead<T> h, BlockLayout l, HeadRows<T> out, T* lse) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* smem = reinterpret_cast<T*>(shared_bytes);
  const int64_t item = blockIdx.x;
  load_head(h, l, smem, item);
  __syncthreads();
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int i = threadIdx.x >> 5; i < h.n; i += warps) {
    T* pr = smem + l.p + i * h.m;
    T hi = -d_inf<T>(), any = 0;
    for (int j = lane; j < h.m; j += 32) {
      pr[j] = block_score(h, l, smem, item, i, j);
      if (h.mask.allowed(item, i, j)) {
        any = 1;
        hi = MaxOp{}(hi, pr[j]);
      }
    }
    hi = warp_reduce(hi, MaxOp{});
    any = warp_reduce(any, MaxOp{});
    const int64_t row = item * h.n + i;
    if (any == T(0)) {
      for (int j = lane; j < h.m; j += 32) pr[j] = 0;
      if (lane == 0) lse[row] = -d_inf<T>();
      continue;
    }
    T total = 0;
    for (int j = lane; j < h.m; j += 32) {
      pr[j] = h.mask.allowed(item, i, j) ? d_exp(pr[j] - hi) : T(0);
      total += pr[j];
    }
    total = warp_reduce(total, SumOp{});
    T inv = T(1) / total;
    for (int j = lane; j < h.m; j += 32) pr[j] *= inv;
    if (lane == 0) lse[row] = hi + d_log(total);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < h.n * h.e; idx += blockDim.x) {
    int i = idx / h.e, c = idx % h.e;
    const T* pr = smem + l.p + i * h.m;
    T acc = 0;
    for (int j = 0; j < h.m; ++j) acc += pr[j] * smem[l.v + j * l.ve + c];
    out.row(item, i)[c] = T(1) * acc;
  }
}

// Backward: P again from the scores and lse, dS = P ∘ (dout vᵀ − rowsum(dout ∘ out)) (a warp per
// row; also written to dbias where wanted), then dq = scale·dS k, dk = scale·dSᵀ q and
// dv = Pᵀ dout (dlogits = dS for the synthesizers, written by the rows).
template <typename T>
__global__ void attention_block_backward_kernel(BlockHead<T> h, BlockLayout l,
                                                HeadRows<const T> out, const T* lse,
                                                HeadRows<const T> dout, HeadRows<T> dq,
                                                HeadRows<T> dk, HeadRows<T> dv,
                                                HeadRows<T> dscores) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* smem = reinterpret_cast<T*>(shared_bytes);
  const int64_t item = blockIdx.x;
  load_head(h, l, smem, item);
  load_rows(smem + l.g, h.e, dout, item, h.n, h.e);
  __syncthreads();
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int i = threadIdx.x >> 5; i < h.n; i += warps) {
    const T* gi = smem + l.g + i * h.e;
    const T* oi = out.row(item, i);
    T row_dot = 0;
    for (int c = lane; c < h.e; c += 32) row_dot += gi[c] * oi[c];
    row_dot = warp_reduce(row_dot, SumOp{});
    const T lrow = lse[item * h.n + i];
    for (int j = lane; j < h.m; j += 32) {
      T pj = 0;
      if (lrow != -d_inf<T>() && h.mask.allowed(item, i, j))
        pj = d_exp(block_score(h, l, smem, item, i, j) - lrow);
      smem[l.p + i * h.m + j] = pj;
      const T g = pj * (dot(gi, smem + l.v + j * l.ve, int64_t(h.e)) - row_dot);
      smem[l.ds + i * h.m + j] = g;
      if (dscores.data) dscores.row(item, i)[j] = g;
    }
  }
  __syncthreads();
  const T* p = smem + l.p;
  const T* ds = smem + l.ds;
  if (!h.given()) {
    for (int idx = threadIdx.x; idx < h.n * h.d; idx += blockDim.x) {  // dq = scale·dS k
      int i = idx / h.d, c = idx % h.d;
      T acc = 0;
      for (int j = 0; j < h.m; ++j) acc += ds[i * h.m + j] * smem[l.k + j * l.kd + c];
      dq.row(item, i)[c] = h.scale * acc;
    }
    for (int idx = threadIdx.x; idx < h.m * h.d; idx += blockDim.x) {  // dk = scale·dSᵀ q
      int j = idx / h.d, c = idx % h.d;
      T acc = 0;
      for (int i = 0; i < h.n; ++i) acc += ds[i * h.m + j] * smem[l.q + i * h.d + c];
      dk.row(item, j)[c] = h.scale * acc;
    }
  }
  for (int idx = threadIdx.x; idx < h.m * h.e; idx += blockDim.x) {  // dv = Pᵀ dout
    int j = idx / h.e, c = idx % h.e;
    T acc = 0;
    for (int i = 0; i < h.n; ++i) acc += p[i * h.m + j] * smem[l.g + i * h.e + c];
    dv.row(item, j)[c] = T(1) * acc;
  }
}

// Heads whose shared-memory arrays stay under this take the block kernels: up to about 64
// tokens a head at 32 features in float32 (the classifiers' 49, the translator's words), with
// room for two blocks on each multiprocessor of an H100/H200 (228 KiB each).
constexpr size_t kBlockAttentionMaxBytes = 96 * 1024;

inline size_t block_bytes(const BlockLayout& l, size_t elem) {
  return static_cast<size_t>(l.end) * elem;
}

// Whether a head of these sizes fits in one block's shared memory on this device.
inline bool attention_block_fits(int64_t n, int64_t m, int64_t d, int64_t e, bool given,
                                 bool backward, size_t elem, size_t device_max_bytes) {
  if (n > 4096 || m > 4096 || d > 4096 || e > 4096) return false;  // int offsets stay small
  BlockLayout l = block_layout(int(n), int(m), int(d), int(e), given, backward);
  size_t bytes = block_bytes(l, elem);
  return bytes <= kBlockAttentionMaxBytes && bytes <= device_max_bytes;
}

}  // namespace mixlab::cuda
