// The attention core fused per (batch, head), forward and backward. Reference:
// backends/cpu/cpu_attention.cpp (the contract is in backends/kernels.def).
//
// Two paths that give the same bits. A head that fits in one thread block's shared memory (the
// classifiers' 49 tokens, the translator's words: attention_block.cuh) is done by one block
// from end to end, its scores and probabilities never written to global memory. A longer head
// takes the row kernels below: a row kernel (a warp or a block per query row, common.cuh's
// Group interface) forms the row's scores, its masked softmax and log-sum-exp into a scratch
// buffer of probabilities; a thread per output element then sums over the keys. The backward
// recomputes the probabilities the same way and forms dS = P ∘ (dP − rowsum(dO ∘ O)) per row,
// then a thread per element of dq, dk and dv sums in a fixed order (no atomics: results repeat
// run to run). Unlike the CPU, that path stores the [B·H, N, M] probabilities in scratch memory
// for the duration of the call.
#include <algorithm>

#include "backends/cuda/attention_block.cuh"
#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

// Score (i, j) of an item: scale·q_i·k_j for attention (rounded to T before anything subtracts
// from it or adds to it), plus the bias where there is one; the given logit for the synthesizers.
template <typename T>
struct DotScores {
  HeadRows<const T> q, k;
  T scale;
  int64_t d;
  HeadRows<const T> bias;  // data null: none
  __device__ __forceinline__ T operator()(int64_t item, int64_t i, int64_t j) const {
    T s = d_mul_rounded(scale, dot(q.row(item, i), k.row(item, j), d));
    return bias.data ? s + bias.row(item, i)[j] : s;
  }
};
template <typename T>
struct GivenScores {
  HeadRows<const T> logits;  // stride 0 on a broadcast batch axis
  __device__ __forceinline__ T operator()(int64_t item, int64_t i, int64_t j) const {
    return logits.row(item, i)[j];
  }
};

// Per query row (b·h·n + i): p[row, :] = masked softmax of the row's scores, lse[row].
template <typename G, typename T, typename Scores>
__global__ void attention_rows_kernel(Scores scores, HeadMask<T> mask, T* p, T* lse, int64_t rows,
                                      int64_t n, int64_t m) {
  int64_t row = G::row();
  if (row >= rows) return;
  int64_t item = row / n, i = row % n;
  T* pr = p + row * m;
  T hi = -d_inf<T>(), any = 0;
  for (int64_t j = G::rank(); j < m; j += G::size()) {
    pr[j] = scores(item, i, j);
    if (mask.allowed(item, i, j)) {
      any = 1;
      hi = MaxOp{}(hi, pr[j]);
    }
  }
  hi = G::reduce(hi, MaxOp{}, -d_inf<T>());
  any = G::reduce(any, MaxOp{}, T(0));
  if (any == T(0)) {
    for (int64_t j = G::rank(); j < m; j += G::size()) pr[j] = 0;
    if (G::rank() == 0) lse[row] = -d_inf<T>();
    return;
  }
  T total = 0;
  for (int64_t j = G::rank(); j < m; j += G::size()) {
    pr[j] = mask.allowed(item, i, j) ? d_exp(pr[j] - hi) : T(0);
    total += pr[j];
  }
  total = G::reduce(total, SumOp{}, T(0));
  T inv = T(1) / total;
  for (int64_t j = G::rank(); j < m; j += G::size()) pr[j] *= inv;
  if (G::rank() == 0) lse[row] = hi + d_log(total);
}

// Per query row: p again from the scores and lse, and ds = p ∘ (dout vᵀ − rowsum(dout ∘ out)),
// written to ds and, where its data is not null, to ds_copy (attention's bias gradient).
template <typename G, typename T, typename Scores>
__global__ void attention_grad_rows_kernel(Scores scores, HeadRows<const T> v, HeadMask<T> mask,
                                           HeadRows<const T> out, const T* lse,
                                           HeadRows<const T> dout, T* p, HeadRows<T> ds,
                                           HeadRows<T> ds_copy, int64_t rows, int64_t n, int64_t m,
                                           int64_t e) {
  int64_t row = G::row();
  if (row >= rows) return;
  int64_t item = row / n, i = row % n;
  const T* gi = dout.row(item, i);
  const T* oi = out.row(item, i);
  T row_dot = 0;
  for (int64_t c = G::rank(); c < e; c += G::size()) row_dot += gi[c] * oi[c];
  row_dot = G::reduce(row_dot, SumOp{}, T(0));
  T l = lse[row];
  for (int64_t j = G::rank(); j < m; j += G::size()) {
    T pj = 0;
    if (l != -d_inf<T>() && mask.allowed(item, i, j)) pj = d_exp(scores(item, i, j) - l);
    p[row * m + j] = pj;
    const T g = pj * (dot(gi, v.row(item, j), e) - row_dot);
    ds.row(item, i)[j] = g;
    if (ds_copy.data) ds_copy.row(item, i)[j] = g;
  }
}

// y[item, r, c] = alpha Σ_t w[item·w_item + r·w_r + t·w_t] x[item, t, c], a thread per element.
template <typename T>
__global__ void weighted_sum_kernel(const T* w, int64_t w_item, int64_t w_r, int64_t w_t,
                                    HeadRows<const T> x, HeadRows<T> y, int64_t items, int64_t rows,
                                    int64_t cols, int64_t inner, T alpha) {
  int64_t total = items * rows * cols;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = idx % cols, r = (idx / cols) % rows, item = idx / (cols * rows);
    const T* wr = w + item * w_item + r * w_r;
    T acc = 0;
    for (int64_t t = 0; t < inner; ++t) acc += wr[t * w_t] * x.row(item, t)[c];
    y.row(item, r)[c] = alpha * acc;
  }
}

template <typename T>
void weighted_sum(cudaStream_t stream, const T* w, int64_t w_item, int64_t w_r, int64_t w_t,
                  const View& x, const View& y, int64_t items, int64_t rows, int64_t cols,
                  int64_t inner, T alpha) {
  int64_t total = items * rows * cols;
  if (total == 0) return;
  weighted_sum_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(
      w, w_item, w_r, w_t, head_rows<const T>(x), head_rows<T>(y), items, rows, cols, inner, alpha);
}

// ---- the one-block-per-head path (attention_block.cuh) ----

constexpr int kAttentionBlockThreads = 256;

// A head's operands for the block kernels; q.data null for the synthesizers' given logits.
template <typename T>
BlockHead<T> block_head(const View& q, const View& k, const View& v, const View& logits,
                        const View& bias, const View& mask, double scale, int64_t heads, int64_t n,
                        int64_t m) {
  const int64_t d = q.data ? q.shape[3] : 0;
  return {optional_rows<const T>(q, heads),
          optional_rows<const T>(k, heads),
          head_rows<const T>(v),
          optional_rows<const T>(logits, heads),
          optional_rows<const T>(bias, heads),
          head_mask<T>(mask, heads),
          T(scale),
          int(n),
          int(m),
          int(d),
          int(v.shape[3])};
}

// Whether the head fits one block's `shared_bytes` (and the grid one block per item).
template <typename T>
bool use_block_path(int64_t items, const BlockHead<T>& h, bool backward, size_t shared_bytes) {
  return items < (int64_t(1) << 31) &&
         attention_block_fits(h.n, h.m, h.d, h.e, h.given(), backward, sizeof(T), shared_bytes);
}

// Launches `kernel` with one block per item and the layout's shared memory (opted in when it
// passes the default 48 KiB).
template <typename Kernel, typename... Args>
void launch_block(Kernel kernel, const BlockLayout& l, size_t elem, int64_t items,
                  cudaStream_t stream, Args... args) {
  const size_t bytes = block_bytes(l, elem);
  if (bytes > 48 * 1024)
    MIXLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
  kernel<<<static_cast<unsigned int>(items), kAttentionBlockThreads, bytes, stream>>>(args...);
}

template <typename T>
void block_forward(const BlockHead<T>& h, const View& out, const View& lse, int64_t items,
                   cudaStream_t stream) {
  BlockLayout l = block_layout(h.n, h.m, h.d, h.e, h.given(), false);
  launch_block(attention_block_kernel<T>, l, sizeof(T), items, stream, h, l, head_rows<T>(out),
               lse.as<T>());
}

template <typename T>
void block_backward(const BlockHead<T>& h, const View& out, const View& lse, const View& dout,
                    const View& dq, const View& dk, const View& dv, const View& dscores,
                    int64_t items, cudaStream_t stream) {
  const int64_t heads = h.v.heads;
  BlockLayout l = block_layout(h.n, h.m, h.d, h.e, h.given(), true);
  launch_block(attention_block_backward_kernel<T>, l, sizeof(T), items, stream, h, l,
               head_rows<const T>(out), lse.as<T>(), head_rows<const T>(dout),
               optional_rows<T>(dq, heads), optional_rows<T>(dk, heads), head_rows<T>(dv),
               optional_rows<T>(dscores, heads));
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::attention(const View& q, const View& k, const View& v, const View& mask,
                            const View& bias, double scale, const View& out, const View& lse) {
  const int64_t items = q.shape[0] * q.shape[1], n = q.shape[2], d = q.shape[3];
  const int64_t m = k.shape[2], e = v.shape[3];
  if (items == 0 || n == 0) return;
  activate();
  dispatch_floating(q.dtype, "attention", [&](auto tag) {
    using T = decltype(tag);
    BlockHead<T> h = block_head<T>(q, k, v, View(), bias, mask, scale, q.shape[1], n, m);
    if (use_block_path(items, h, false, shared_bytes_per_block()))
      return block_forward(h, out, lse, items, stream_);
    Scratch p(*this, static_cast<size_t>(items * n * m) * sizeof(T));
    launch_rows(items * n, m, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      attention_rows_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          DotScores<T>{head_rows<const T>(q), head_rows<const T>(k), T(scale), d,
                       optional_rows<const T>(bias, q.shape[1])},
          head_mask<T>(mask, q.shape[1]), p.as<T>(), lse.as<T>(), items * n, n, m);
    });
    weighted_sum<T>(stream_, p.as<T>(), n * m, m, 1, v, out, items, n, e, m, T(1));
  });
  check_launch("attention");
}

void CudaBackend::attention_backward(const View& q, const View& k, const View& v, const View& mask,
                                     const View& bias, double scale, const View& out,
                                     const View& lse, const View& dout, const View& dq,
                                     const View& dk, const View& dv, const View& dbias) {
  const int64_t items = q.shape[0] * q.shape[1], n = q.shape[2], d = q.shape[3];
  const int64_t m = k.shape[2], e = v.shape[3];
  if (items == 0) return;
  activate();
  dispatch_floating(q.dtype, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    BlockHead<T> h = block_head<T>(q, k, v, View(), bias, mask, scale, q.shape[1], n, m);
    if (use_block_path(items, h, true, shared_bytes_per_block()))
      return block_backward(h, out, lse, dout, dq, dk, dv, dbias, items, stream_);
    size_t bytes = static_cast<size_t>(items * n * m) * sizeof(T);
    Scratch p(*this, bytes), ds(*this, bytes);
    launch_rows(items * n, std::max(m, e), [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      attention_grad_rows_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          DotScores<T>{head_rows<const T>(q), head_rows<const T>(k), T(scale), d,
                       optional_rows<const T>(bias, q.shape[1])},
          head_rows<const T>(v), head_mask<T>(mask, q.shape[1]), head_rows<const T>(out),
          lse.as<T>(), head_rows<const T>(dout), p.as<T>(),
          HeadRows<T>{ds.as<T>(), q.shape[1] * n * m, n * m, m, q.shape[1]},
          optional_rows<T>(dbias, q.shape[1]), items * n, n, m, e);
    });
    // dq = scale·dS k; dk = scale·dSᵀ q; dv = Pᵀ dout (the transposes by strides).
    weighted_sum<T>(stream_, ds.as<T>(), n * m, m, 1, k, dq, items, n, d, m, T(scale));
    weighted_sum<T>(stream_, ds.as<T>(), n * m, 1, m, q, dk, items, m, d, n, T(scale));
    weighted_sum<T>(stream_, p.as<T>(), n * m, 1, m, dout, dv, items, m, e, n, T(1));
  });
  check_launch("attention_backward");
}

// The synthesizers' core: the same kernels on the given logits; the backward writes dS straight
// into dlogits.
void CudaBackend::synthesized_attention(const View& logits, const View& v, const View& mask,
                                        const View& out, const View& lse) {
  const int64_t items = v.shape[0] * v.shape[1], n = logits.shape[2], m = logits.shape[3];
  const int64_t e = v.shape[3];
  if (items == 0 || n == 0) return;
  activate();
  dispatch_floating(v.dtype, "synthesized_attention", [&](auto tag) {
    using T = decltype(tag);
    BlockHead<T> h = block_head<T>(View(), View(), v, logits, View(), mask, 1.0, v.shape[1], n, m);
    if (use_block_path(items, h, false, shared_bytes_per_block()))
      return block_forward(h, out, lse, items, stream_);
    Scratch p(*this, static_cast<size_t>(items * n * m) * sizeof(T));
    launch_rows(items * n, m, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      attention_rows_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          GivenScores<T>{head_rows<const T>(logits)}, head_mask<T>(mask, v.shape[1]), p.as<T>(),
          lse.as<T>(), items * n, n, m);
    });
    weighted_sum<T>(stream_, p.as<T>(), n * m, m, 1, v, out, items, n, e, m, T(1));
  });
  check_launch("synthesized_attention");
}

void CudaBackend::synthesized_attention_backward(const View& logits, const View& v,
                                                 const View& mask, const View& out, const View& lse,
                                                 const View& dout, const View& dlogits,
                                                 const View& dv) {
  const int64_t items = v.shape[0] * v.shape[1], n = logits.shape[2], m = logits.shape[3];
  const int64_t e = v.shape[3];
  if (items == 0) return;
  activate();
  dispatch_floating(v.dtype, "synthesized_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    BlockHead<T> h = block_head<T>(View(), View(), v, logits, View(), mask, 1.0, v.shape[1], n, m);
    if (use_block_path(items, h, true, shared_bytes_per_block()))
      return block_backward(h, out, lse, dout, View(), View(), dv, dlogits, items, stream_);
    Scratch p(*this, static_cast<size_t>(items * n * m) * sizeof(T));
    launch_rows(items * n, std::max(m, e), [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      attention_grad_rows_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          GivenScores<T>{head_rows<const T>(logits)}, head_rows<const T>(v),
          head_mask<T>(mask, v.shape[1]), head_rows<const T>(out), lse.as<T>(),
          head_rows<const T>(dout), p.as<T>(), head_rows<T>(dlogits),
          optional_rows<T>(View(), v.shape[1]), items * n, n, m, e);
    });
    weighted_sum<T>(stream_, p.as<T>(), n * m, 1, m, dout, dv, items, m, e, n, T(1));  // Pᵀ dout
  });
  check_launch("synthesized_attention_backward");
}

}  // namespace mixlab
