// Row kernels: softmax, layer norm and cross-entropy, forward and backward. Reference:
// backends/cpu/cpu_rows.cpp (same formulas, same order of operations within an element).
//
// A row is handled by one warp (rows of up to kWarpRowMaxCols columns, 8 rows per block) or by
// one block (longer rows); its lanes stride over the columns (coalesced) and combine their
// partial maxima and sums with shuffle (warp) or shuffle + shared-memory (block) reductions.
// Kernels are written once against the Group interface of common.cuh and launched either way.
// The layer-norm parameter gradients are column sums over rows: a 32x8 block per column tile
// and chunk of rows, partial sums combined in a fixed order (deterministic).
#include <algorithm>

#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

// ---- softmax ------------------------------------------------------------------------------------

template <typename G, typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t rows, int64_t cols, bool log) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* in = x + row * cols;
  T* out = y + row * cols;
  T hi = -d_inf<T>();
  for (int64_t i = G::rank(); i < cols; i += G::size()) hi = MaxOp{}(hi, in[i]);
  hi = G::reduce(hi, MaxOp{}, -d_inf<T>());
  T total = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) total += d_exp(in[i] - hi);
  total = G::reduce(total, SumOp{}, T(0));
  if (log) {
    T lse = hi + d_log(total);
    for (int64_t i = G::rank(); i < cols; i += G::size()) out[i] = in[i] - lse;
  } else {
    T inv = T(1) / total;
    for (int64_t i = G::rank(); i < cols; i += G::size()) out[i] = d_exp(in[i] - hi) * inv;
  }
}

template <typename G, typename T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols,
                                        bool log) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* py = y + row * cols;
  const T* pg = dy + row * cols;
  T* pd = dx + row * cols;
  T acc = 0;
  if (log) {
    for (int64_t i = G::rank(); i < cols; i += G::size()) acc += pg[i];
  } else {
    for (int64_t i = G::rank(); i < cols; i += G::size()) acc += pg[i] * py[i];
  }
  acc = G::reduce(acc, SumOp{}, T(0));
  if (log) {
    for (int64_t i = G::rank(); i < cols; i += G::size()) pd[i] = pg[i] - d_exp(py[i]) * acc;
  } else {
    for (int64_t i = G::rank(); i < cols; i += G::size()) pd[i] = py[i] * (pg[i] - acc);
  }
}

// ---- layer norm: y = (x - mean) * rstd * gamma + beta, biased variance --------------------------

template <typename G, typename T>
__global__ void layer_norm_kernel(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                                  int64_t rows, int64_t cols, T eps) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* in = x + row * cols;
  T* out = y + row * cols;
  T m = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) m += in[i];
  m = G::reduce(m, SumOp{}, T(0)) / T(cols);
  T var = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) var += (in[i] - m) * (in[i] - m);
  var = G::reduce(var, SumOp{}, T(0)) / T(cols);
  T rs = T(1) / d_sqrt(var + eps);
  if (G::rank() == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
  for (int64_t i = G::rank(); i < cols; i += G::size()) {
    T v = (in[i] - m) * rs;
    if (gamma) v *= gamma[i];
    if (beta) v += beta[i];
    out[i] = v;
  }
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * gamma.
template <typename G, typename T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const T* mean, const T* rstd,
                                     const T* gamma, T* dx, int64_t rows, int64_t cols) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* px = x + row * cols;
  const T* pg = dy + row * cols;
  T* pd = dx + row * cols;
  T m = mean[row], rs = rstd[row];
  T sum_d = 0, sum_dx = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) {
    T xhat = (px[i] - m) * rs;
    T d = gamma ? pg[i] * gamma[i] : pg[i];
    sum_d += d;
    sum_dx += d * xhat;
  }
  sum_d = G::reduce(sum_d, SumOp{}, T(0)) / T(cols);
  sum_dx = G::reduce(sum_dx, SumOp{}, T(0)) / T(cols);
  for (int64_t i = G::rank(); i < cols; i += G::size()) {
    T xhat = (px[i] - m) * rs;
    T d = gamma ? pg[i] * gamma[i] : pg[i];
    pd[i] = rs * (d - sum_d - xhat * sum_dx);
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

// out[c] = sum over chunks of partial[chunk * cols + c], in chunk order.
template <typename T>
__global__ void sum_chunks_kernel(const T* partial, T* out, int64_t chunks, int64_t cols) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T acc = 0;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * cols + c];
    out[c] = acc;
  }
}

// ---- cross-entropy with label smoothing: target q = (1-eps) onehot + eps/C ----------------------

template <typename G, typename T>
__global__ void cross_entropy_kernel(const T* logits, const int32_t* targets, T* loss, T* lse,
                                     int64_t rows, int64_t cols, int64_t ignore_index, T eps) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* z = logits + row * cols;
  T hi = -d_inf<T>();
  for (int64_t i = G::rank(); i < cols; i += G::size()) hi = MaxOp{}(hi, z[i]);
  hi = G::reduce(hi, MaxOp{}, -d_inf<T>());
  T total = 0, zsum = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) {
    total += d_exp(z[i] - hi);
    zsum += z[i];
  }
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
  // -sum_i q_i (z_i - lse) = (1-eps)(lse - z_t) + eps (lse - mean(z))
  loss[row] = (T(1) - eps) * (l - z[t]) + eps * (l - zsum / T(cols));
}

// Elementwise over [rows, cols]: every element only needs its row's target, lse and scale.
template <typename T>
__global__ void cross_entropy_backward_kernel(const T* logits, const int32_t* targets, const T* lse,
                                              const T* scale, T* dlogits, int64_t rows,
                                              int64_t cols, int64_t ignore_index, T smoothing) {
  int64_t total = rows * cols;
  T off = smoothing / T(cols);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t r = i / cols, c = i - r * cols;
    int64_t t = targets[r];
    if (t == ignore_index) {
      dlogits[i] = 0;
      continue;
    }
    T s = scale[r];
    T d = s * (d_exp(logits[i] - lse[r]) - off);
    if (c == t) d -= s * (T(1) - smoothing);
    dlogits[i] = d;
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) {
  if (rows == 0 || cols == 0) return;
  activate();
  dispatch_floating(x.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      softmax_kernel<G, T><<<blocks, threads, 0, stream_>>>(x.as<T>(), y.as<T>(), rows, cols, log);
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
    launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      softmax_backward_kernel<G, T>
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
    launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      layer_norm_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          x.as<T>(), gamma.as<T>(), beta.as<T>(), y.as<T>(), mean.as<T>(), rstd.as<T>(), rows, cols,
          static_cast<T>(eps));
    });
  });
  check_launch("layer_norm");
}

void CudaBackend::layer_norm_backward(const View& dy, const View& x, const View& mean,
                                      const View& rstd, const View& gamma, const View& dx,
                                      const View& dgamma, const View& dbeta, int64_t rows,
                                      int64_t cols) {
  if (rows == 0 || cols == 0) return;
  activate();
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      layer_norm_dx_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          dy.as<T>(), x.as<T>(), mean.as<T>(), rstd.as<T>(), gamma.as<T>(), dx.as<T>(), rows, cols);
    });
    if (!dgamma.data && !dbeta.data) return;
    // Enough (column tile, row chunk) blocks to fill the GPU; chunks of at least 32 rows.
    int64_t tiles = (cols + 31) / 32;
    int64_t chunks = std::min<int64_t>((rows + 31) / 32, std::max<int64_t>(1, 1024 / tiles));
    chunks = std::min<int64_t>(chunks, 65535);
    int64_t per = (rows + chunks - 1) / chunks;
    chunks = (rows + per - 1) / per;
    dim3 block(32, 8);
    dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(chunks));
    if (chunks == 1) {
      layer_norm_params_kernel<T><<<grid, block, 0, stream_>>>(dy.as<T>(), x.as<T>(), mean.as<T>(),
                                                               rstd.as<T>(), dgamma.as<T>(),
                                                               dbeta.as<T>(), rows, cols, per);
      return;
    }
    Scratch pg(*this, dgamma.data ? sizeof(T) * chunks * cols : 0);
    Scratch pb(*this, dbeta.data ? sizeof(T) * chunks * cols : 0);
    layer_norm_params_kernel<T><<<grid, block, 0, stream_>>>(
        dy.as<T>(), x.as<T>(), mean.as<T>(), rstd.as<T>(), pg.as<T>(), pb.as<T>(), rows, cols, per);
    check_launch("layer_norm_backward");
    if (dgamma.data)
      sum_chunks_kernel<T>
          <<<grid_for(cols), kBlock, 0, stream_>>>(pg.as<T>(), dgamma.as<T>(), chunks, cols);
    if (dbeta.data)
      sum_chunks_kernel<T>
          <<<grid_for(cols), kBlock, 0, stream_>>>(pb.as<T>(), dbeta.as<T>(), chunks, cols);
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
    launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      cross_entropy_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          logits.as<T>(), targets.as<int32_t>(), loss.as<T>(), lse.as<T>(), rows, cols,
          ignore_index, static_cast<T>(smoothing));
    });
  });
  check_launch("cross_entropy");
}

void CudaBackend::cross_entropy_backward(const View& logits, const View& targets, const View& lse,
                                         const View& scale, const View& dlogits, int64_t rows,
                                         int64_t cols, int64_t ignore_index, double smoothing) {
  int64_t total = rows * cols;
  if (total == 0) return;
  activate();
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_backward_kernel<T><<<grid_for(total), kBlock, 0, stream_>>>(
        logits.as<T>(), targets.as<int32_t>(), lse.as<T>(), scale.as<T>(), dlogits.as<T>(), rows,
        cols, ignore_index, static_cast<T>(smoothing));
  });
  check_launch("cross_entropy_backward");
}

}  // namespace mixlab
