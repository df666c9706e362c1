// Row kernels: softmax, layer norm and cross-entropy, forward and backward. Reference:
// backends/cpu/cpu_rows.cpp (same formulas, same order of operations within an element).
//
// A row is handled by one warp (rows of up to kWarpRowMaxCols columns, 8 rows per block) or by
// one block (longer rows); its lanes stride over the columns (coalesced) and combine their
// partial maxima and sums with shuffle (warp) or shuffle + shared-memory (block) reductions.
// Kernels are written once against the Group interface of common.cuh and launched either way.
// A thread's elements of its row come through RowCache: loaded into registers once, all loads
// in flight together, where launch_cached_rows's policy says that pays (forward kernels: rows of
// up to 128; backward kernels, which read two rows: up to 8192), else read again on each pass.
// The layer norm's backward on rows of up to 512 is one kernel: each warp takes several rows and
// sums their dgamma/dbeta in registers, the block's warps then add theirs into one partial row.
// On longer rows the parameter gradients are column sums: a 32x8 block per column tile and chunk
// of rows. Either way the partial rows are added by sums.cuh's column_sums_kernel; every sum
// runs in a fixed order (deterministic for a given GPU).
#include <algorithm>
#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/sums.cuh"

namespace mixlab {
namespace cuda {
namespace {

// ---- softmax ------------------------------------------------------------------------------------

template <typename G, int K, typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t rows, int64_t cols, bool log) {
  int64_t row = G::row();
  if (row >= rows) return;
  RowCache<G, K, T> in(x + row * cols, cols);
  T* out = y + row * cols;
  T hi = -d_inf<T>();
  in.each([&](int64_t, T v) { hi = MaxOp{}(hi, v); });
  hi = G::reduce(hi, MaxOp{}, -d_inf<T>());
  T total = 0;
  in.each([&](int64_t, T v) { total += d_exp(v - hi); });
  total = G::reduce(total, SumOp{}, T(0));
  if (log) {
    T lse = hi + d_log(total);
    in.each([&](int64_t i, T v) { out[i] = v - lse; });
  } else {
    T inv = T(1) / total;
    in.each([&](int64_t i, T v) { out[i] = d_exp(v - hi) * inv; });
  }
}

template <typename G, int K, typename T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols,
                                        bool log) {
  int64_t row = G::row();
  if (row >= rows) return;
  RowCache<G, K, T> py(y + row * cols, cols), pg(dy + row * cols, cols);
  T* pd = dx + row * cols;
  T acc = 0;
  if (log) {
    pg.each([&](int64_t, T g) { acc += g; });
  } else {
    pg.each_with(py, [&](int64_t, T g, T yi) { acc += g * yi; });
  }
  acc = G::reduce(acc, SumOp{}, T(0));
  if (log) {
    pg.each_with(py, [&](int64_t i, T g, T yi) { pd[i] = g - d_exp(yi) * acc; });
  } else {
    pg.each_with(py, [&](int64_t i, T g, T yi) { pd[i] = yi * (g - acc); });
  }
}

// ---- layer norm: y = (x - mean) * rstd * gamma + beta, biased variance --------------------------

template <typename G, int K, typename T>
__global__ void layer_norm_kernel(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                                  int64_t rows, int64_t cols, T eps) {
  int64_t row = G::row();
  if (row >= rows) return;
  RowCache<G, K, T> in(x + row * cols, cols);
  T* out = y + row * cols;
  T m = 0;
  in.each([&](int64_t, T v) { m += v; });
  m = G::reduce(m, SumOp{}, T(0)) / T(cols);
  T var = 0;
  in.each([&](int64_t, T v) { var += (v - m) * (v - m); });
  var = G::reduce(var, SumOp{}, T(0)) / T(cols);
  T rs = T(1) / d_sqrt(var + eps);
  if (G::rank() == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
  in.each([&](int64_t i, T v) {
    v = (v - m) * rs;
    if (gamma) v *= gamma[i];
    if (beta) v += beta[i];
    out[i] = v;
  });
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * gamma.
// For rows longer than layer_norm_backward_rows_kernel takes (over 512); their parameters'
// gradients are layer_norm_params_kernel's.
template <typename G, int K, typename T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const T* mean, const T* rstd,
                                     const T* gamma, T* dx, int64_t rows, int64_t cols,
                                     bool accumulate) {
  int64_t row = G::row();
  if (row >= rows) return;
  RowCache<G, K, T> px(x + row * cols, cols), pg(dy + row * cols, cols);
  T* pd = dx + row * cols;
  T m = mean[row], rs = rstd[row];
  T sum_d = 0, sum_dx = 0;
  px.each_with(pg, [&](int64_t i, T xi, T g) {
    T xhat = (xi - m) * rs;
    T d = gamma ? g * gamma[i] : g;
    sum_d += d;
    sum_dx += d * xhat;
  });
  sum_d = G::reduce(sum_d, SumOp{}, T(0)) / T(cols);
  sum_dx = G::reduce(sum_dx, SumOp{}, T(0)) / T(cols);
  px.each_with(pg, [&](int64_t i, T xi, T g) {
    T xhat = (xi - m) * rs;
    T d = gamma ? g * gamma[i] : g;
    T v = rs * (d - sum_d - xhat * sum_dx);
    pd[i] = accumulate ? pd[i] + v : v;  // the engine's addition: the gradient before, then this
  });
}

// The whole backward of rows a warp takes (up to 32 * K columns) in one pass over dy and x: warp
// w of W takes rows w, w + W, ... and computes dx as layer_norm_dx_kernel does; its lanes keep
// running sums of dgamma (dy * xhat) and dbeta (dy) for their columns in registers. At the end
// the block's warps add theirs into shared memory in warp order, and the block writes its partial
// row pg/pb[blockIdx.x * cols + c], summed over blocks by add_partial_rows (fixed orders
// throughout: the same bits on every run with the same grid). Dynamic shared memory: 2 * cols T.
template <int K, typename T>
__global__ void layer_norm_backward_rows_kernel(const T* dy, const T* x, const T* mean,
                                                const T* rstd, const T* gamma, T* dx, T* pg, T* pb,
                                                int64_t rows, int64_t cols, bool accumulate) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* sg = reinterpret_cast<T*>(shared_bytes);
  T* sb = sg + cols;
  const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const bool params = pg != nullptr;
  T acc_g[K], acc_b[K];
#pragma unroll
  for (int j = 0; j < K; ++j) acc_g[j] = acc_b[j] = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * warps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * warps + warp; row < rows; row += stride) {
    RowCache<WarpPerRow, K, T> px(x + row * cols, cols), pd(dy + row * cols, cols);
    T m = mean[row], rs = rstd[row];
    T sum_d = 0, sum_dx = 0;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      int64_t i = WarpPerRow::rank() + 32 * j;
      if (i >= cols) continue;
      T xhat = (px.v[j] - m) * rs;
      T g = pd.v[j];
      T d = gamma ? g * gamma[i] : g;
      sum_d += d;
      sum_dx += d * xhat;
      if (params) {
        acc_g[j] += g * xhat;
        acc_b[j] += g;
      }
    }
    sum_d = warp_reduce(sum_d, SumOp{}) / T(cols);
    sum_dx = warp_reduce(sum_dx, SumOp{}) / T(cols);
    T* out = dx + row * cols;
    px.each_with(pd, [&](int64_t i, T xi, T g) {
      T xhat = (xi - m) * rs;
      T d = gamma ? g * gamma[i] : g;
      T v = rs * (d - sum_d - xhat * sum_dx);
      out[i] = accumulate ? out[i] + v : v;
    });
  }
  if (!params) return;  // uniform across the block: no barrier is skipped by some threads only
  for (int w = 0; w < warps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int j = 0; j < K; ++j) {
        int64_t i = WarpPerRow::rank() + 32 * j;
        if (i >= cols) continue;
        sg[i] = (w == 0 ? T(0) : sg[i]) + acc_g[j];
        sb[i] = (w == 0 ? T(0) : sb[i]) + acc_b[j];
      }
    }
    __syncthreads();
  }
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    pg[static_cast<int64_t>(blockIdx.x) * cols + c] = sg[c];
    pb[static_cast<int64_t>(blockIdx.x) * cols + c] = sb[c];
  }
}

// Block (32, 8): column c = blockIdx.x * 32 + tx, rows of chunk blockIdx.y strided by 8 over ty.
// Writes the chunk's sums to pg/pb[blockIdx.y * cols + c] (either may be null).
template <typename T>
__global__ void layer_norm_params_kernel(const T* dy, const T* x, const T* mean, const T* rstd,
                                         T* pg, T* pb, int64_t rows, int64_t cols,
                                         int64_t rows_per_chunk) {
  __shared__ T sg[8][33], sb[8][33];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + tx;
  int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  int64_t end = min(rows, begin + rows_per_chunk);
  T acc_g = 0, acc_b = 0;
  if (c < cols) {
    for (int64_t r = begin + ty; r < end; r += 8) {
      T g = dy[r * cols + c];
      acc_g += g * ((x[r * cols + c] - mean[r]) * rstd[r]);
      acc_b += g;
    }
  }
  sg[ty][tx] = acc_g;
  sb[ty][tx] = acc_b;
  __syncthreads();
  if (ty == 0 && c < cols) {
    T tg = 0, tb = 0;
    for (int k = 0; k < 8; ++k) {
      tg += sg[k][tx];
      tb += sb[k][tx];
    }
    int64_t o = static_cast<int64_t>(blockIdx.y) * cols + c;
    if (pg) pg[o] = tg;
    if (pb) pb[o] = tb;
  }
}

// ---- cross-entropy with label smoothing: target q = (1-eps) onehot + eps/C ----------------------

template <typename G, int K, typename T>
__global__ void cross_entropy_kernel(const T* logits, const int32_t* targets, T* loss, T* lse,
                                     int64_t rows, int64_t cols, int64_t ignore_index, T eps) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* z = logits + row * cols;
  RowCache<G, K, T> in(z, cols);
  T hi = -d_inf<T>();
  in.each([&](int64_t, T v) { hi = MaxOp{}(hi, v); });
  hi = G::reduce(hi, MaxOp{}, -d_inf<T>());
  T total = 0, zsum = 0;
  in.each([&](int64_t, T v) {
    total += d_exp(v - hi);
    zsum += v;
  });
  total = G::reduce(total, SumOp{}, T(0));
  zsum = G::reduce(zsum, SumOp{}, T(0));
  if (G::rank() != 0) return;
  T l = hi + d_log(total);
  lse[row] = l;
  int64_t t = targets[row];
  if (t == ignore_index) {
    loss[row] = 0;
    return;
  }
  if (t < 0 || t >= cols) {               // a bad target (its check reports it at the next wait)
    loss[row] = d_inf<T>() - d_inf<T>();  // NaN, and no read outside the row
    return;
  }
  // -sum_i q_i (z_i - lse) = (1-eps)(lse - z_t) + eps (lse - mean(z))
  loss[row] = (T(1) - eps) * (l - z[t]) + eps * (l - zsum / T(cols));
}

// A row per warp or block, like the forward: the row's target, lse and scale are read once and
// no element divides its index to find its row.
template <typename G, int K, typename T>
__global__ void cross_entropy_backward_kernel(const T* logits, const int32_t* targets, const T* lse,
                                              const T* scale, T* dlogits, int64_t rows,
                                              int64_t cols, int64_t ignore_index, T smoothing) {
  int64_t row = G::row();
  if (row >= rows) return;
  T* out = dlogits + row * cols;
  int64_t t = targets[row];
  if (t == ignore_index) {
    for (int64_t i = G::rank(); i < cols; i += G::size()) out[i] = 0;
    return;
  }
  RowCache<G, K, T> in(logits + row * cols, cols);
  T s = scale[row], l = lse[row];
  T off = smoothing / T(cols);
  in.each([&](int64_t i, T z) {
    T d = s * (d_exp(z - l) - off);
    if (i == t) d -= s * (T(1) - smoothing);
    out[i] = d;
  });
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) {
  if (rows == 0 || cols == 0) return;
  activate();
  dispatch_floating(x.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    launch_cached_rows<kCacheShortRows>(
        rows, cols, [&](auto group, auto k, unsigned int blocks, int threads) {
          using G = decltype(group);
          softmax_kernel<G, k(), T>
              <<<blocks, threads, 0, stream_>>>(x.as<T>(), y.as<T>(), rows, cols, log);
        });
  });
  check_launch("softmax");
}

void CudaBackend::softmax_backward(const View& y, const View& dy, const View& dx, int64_t rows,
                                   int64_t cols, bool log) {
  if (rows == 0 || cols == 0) return;
  activate();
  dispatch_floating(y.dtype, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    launch_cached_rows<kCacheRows>(
        rows, cols, [&](auto group, auto k, unsigned int blocks, int threads) {
          using G = decltype(group);
          softmax_backward_kernel<G, k(), T>
              <<<blocks, threads, 0, stream_>>>(y.as<T>(), dy.as<T>(), dx.as<T>(), rows, cols, log);
        });
  });
  check_launch("softmax_backward");
}

void CudaBackend::layer_norm(const View& x, const View& gamma, const View& beta, const View& y,
                             const View& mean, const View& rstd, int64_t rows, int64_t cols,
                             double eps) {
  if (rows == 0) return;
  activate();
  dispatch_floating(x.dtype, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    launch_cached_rows<kCacheShortRows>(
        rows, cols, [&](auto group, auto k, unsigned int blocks, int threads) {
          using G = decltype(group);
          layer_norm_kernel<G, k(), T><<<blocks, threads, 0, stream_>>>(
              x.as<T>(), gamma.as<T>(), beta.as<T>(), y.as<T>(), mean.as<T>(), rstd.as<T>(), rows,
              cols, static_cast<T>(eps));
        });
  });
  check_launch("layer_norm");
}

namespace {

// Rows of up to 512 columns: layer_norm_backward_rows_kernel, a warp per row and the
// parameters' partial sums per block, then their column sums. At 1024 columns its registers
// (two rows cached and two sums per column, 167 a thread) cut occupancy so far that it ran
// slower on an H200 than the separate dx and parameter kernels (121 against 85 us at 8192 rows).
constexpr int64_t kLayerNormByWarpsMaxCols = 512;
template <typename T>
void layer_norm_backward_by_warps(CudaBackend& backend, const View& dy, const View& x,
                                  const View& mean, const View& rstd, const View& gamma,
                                  const View& dx, const View& dgamma, const View& dbeta,
                                  int64_t rows, int64_t cols, bool accumulate) {
  cudaStream_t stream = backend.stream();
  constexpr int kThreads = 256, kWarps = kThreads / 32;
  // A few blocks per multiprocessor: every warp takes several rows, so the partial rows to add
  // stay few (blocks * cols) next to the rows * cols read.
  int64_t blocks =
      std::min<int64_t>((rows + kWarps - 1) / kWarps, std::max(1, backend.multiprocessors()) * 4);
  const bool params = dgamma.data || dbeta.data;
  Scratch pg(backend, params ? sizeof(T) * blocks * cols : 0);
  Scratch pb(backend, params ? sizeof(T) * blocks * cols : 0);
  size_t shared = params ? 2 * sizeof(T) * cols : 0;
  auto launch = [&](auto k) {
    layer_norm_backward_rows_kernel<k(), T>
        <<<static_cast<unsigned int>(blocks), kThreads, shared, stream>>>(
            dy.as<T>(), x.as<T>(), mean.as<T>(), rstd.as<T>(), gamma.as<T>(), dx.as<T>(),
            pg.as<T>(), pb.as<T>(), rows, cols, accumulate);
  };
  if (cols <= 128)
    launch(std::integral_constant<int, 4>{});
  else
    launch(std::integral_constant<int, 16>{});
  backend.check_launch("layer_norm_backward");
  if (dgamma.data) add_partial_rows<T>(stream, pg.as<T>(), blocks, cols, dgamma.as<T>());
  if (dbeta.data) add_partial_rows<T>(stream, pb.as<T>(), blocks, cols, dbeta.as<T>());
}

}  // namespace

void CudaBackend::layer_norm_backward(const View& dy, const View& x, const View& mean,
                                      const View& rstd, const View& gamma, const View& dx,
                                      const View& dgamma, const View& dbeta, int64_t rows,
                                      int64_t cols, bool accumulate) {
  if (cols == 0) return;
  activate();
  if (rows == 0) {  // no rows: the parameters' gradients are sums of nothing, overwritten with 0
    size_t bytes = static_cast<size_t>(cols) * dtype_size(x.dtype);
    if (dgamma.data) MIXLAB_CUDA_CHECK(cudaMemsetAsync(dgamma.data, 0, bytes, stream_));
    if (dbeta.data) MIXLAB_CUDA_CHECK(cudaMemsetAsync(dbeta.data, 0, bytes, stream_));
    return;
  }
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    if (cols <= kLayerNormByWarpsMaxCols) {
      layer_norm_backward_by_warps<T>(*this, dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows,
                                      cols, accumulate);
      return;
    }
    launch_cached_rows<kCacheRows>(
        rows, cols, [&](auto group, auto k, unsigned int blocks, int threads) {
          using G = decltype(group);
          layer_norm_dx_kernel<G, k(), T>
              <<<blocks, threads, 0, stream_>>>(dy.as<T>(), x.as<T>(), mean.as<T>(), rstd.as<T>(),
                                                gamma.as<T>(), dx.as<T>(), rows, cols, accumulate);
        });
    if (!dgamma.data && !dbeta.data) return;
    // Column sums of dy * xhat and dy, split as sums.cuh's column_sums splits them.
    ColumnChunks plan = column_chunks(rows, cols);
    if (plan.chunks == 1) {
      layer_norm_params_kernel<T><<<plan.grid(), dim3(32, 8), 0, stream_>>>(
          dy.as<T>(), x.as<T>(), mean.as<T>(), rstd.as<T>(), dgamma.as<T>(), dbeta.as<T>(), rows,
          cols, plan.rows_per_chunk);
      return;
    }
    Scratch pg(*this, dgamma.data ? sizeof(T) * plan.chunks * cols : 0);
    Scratch pb(*this, dbeta.data ? sizeof(T) * plan.chunks * cols : 0);
    layer_norm_params_kernel<T><<<plan.grid(), dim3(32, 8), 0, stream_>>>(
        dy.as<T>(), x.as<T>(), mean.as<T>(), rstd.as<T>(), pg.as<T>(), pb.as<T>(), rows, cols,
        plan.rows_per_chunk);
    check_launch("layer_norm_backward");
    if (dgamma.data) add_partial_rows<T>(stream_, pg.as<T>(), plan.chunks, cols, dgamma.as<T>());
    if (dbeta.data) add_partial_rows<T>(stream_, pb.as<T>(), plan.chunks, cols, dbeta.as<T>());
  });
  check_launch("layer_norm_backward");
}

void CudaBackend::cross_entropy(const View& logits, const View& targets, const View& loss,
                                const View& lse, int64_t rows, int64_t cols, int64_t ignore_index,
                                double smoothing) {
  if (rows == 0) return;
  activate();
  dispatch_floating(logits.dtype, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    launch_cached_rows<kCacheShortRows>(
        rows, cols, [&](auto group, auto k, unsigned int blocks, int threads) {
          using G = decltype(group);
          cross_entropy_kernel<G, k(), T><<<blocks, threads, 0, stream_>>>(
              logits.as<T>(), targets.as<int32_t>(), loss.as<T>(), lse.as<T>(), rows, cols,
              ignore_index, static_cast<T>(smoothing));
        });
  });
  check_launch("cross_entropy");
}

void CudaBackend::cross_entropy_backward(const View& logits, const View& targets, const View& lse,
                                         const View& scale, const View& dlogits, int64_t rows,
                                         int64_t cols, int64_t ignore_index, double smoothing) {
  if (rows == 0 || cols == 0) return;
  activate();
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    launch_cached_rows<kCacheRows>(
        rows, cols, [&](auto group, auto k, unsigned int blocks, int threads) {
          using G = decltype(group);
          cross_entropy_backward_kernel<G, k(), T><<<blocks, threads, 0, stream_>>>(
              logits.as<T>(), targets.as<int32_t>(), lse.as<T>(), scale.as<T>(), dlogits.as<T>(),
              rows, cols, ignore_index, static_cast<T>(smoothing));
        });
  });
  check_launch("cross_entropy_backward");
}

}  // namespace mixlab
