// Reductions over the middle axis of [outer, n, inner], and the running log-sum-exp with its
// backward. Reference: backends/cpu/cpu_reduce.cpp.
//
// reduce: contiguous rows (inner == 1) go a warp or a block per row; columns (inner > 1) a
// thread per output, reading across `inner` so neighbouring threads touch neighbouring memory.
// When there are too few outputs to fill the GPU, the n axis is split into chunks whose
// partial results are reduced again by the same code (a fixed order: results are deterministic).
//
// logcumsumexp: a thread per column walking n when there are many columns; otherwise a warp per
// column scanning tiles of 32 (shuffle scan with log-add-exp, the carry passed between tiles).
// The backward runs the CPU's stable recurrence s_j = dy_j + exp(y_j - y_{j+1}) s_{j+1}; the
// warp version scans it as a composition of affine maps from the end.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/cuda_math.cuh"
#include "backends/scan_ops.h"

namespace mixlab {
namespace cuda {
namespace {

template <typename T, typename Op>
T host_init() {
  if constexpr (std::is_same_v<Op, SumOp>) return T(0);
  if constexpr (std::is_same_v<Op, MaxOp>) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::infinity();
}

// ---- reduce ------------------------------------------------------------------------------------

template <typename Group, typename T, typename Op>
__global__ void reduce_rows_kernel(const T* in, T* out, int64_t rows, int64_t n, T init) {
  int64_t row = Group::row();
  if (row >= rows) return;
  const T* src = in + row * n;
  Op op;
  T acc = init;
  for (int64_t j = Group::rank(); j < n; j += Group::size()) acc = op(acc, src[j]);
  acc = Group::reduce(acc, op, init);
  if (Group::rank() == 0) out[row] = acc;
}

// Block (s, r) reduces chunk s of row r into partial[r * splits + s].
template <typename T, typename Op>
__global__ void reduce_rows_partial_kernel(const T* in, T* partial, int64_t n, int64_t chunk,
                                           T init) {
  int64_t r = blockIdx.y, s = blockIdx.x;
  int64_t begin = s * chunk, end = min(n, begin + chunk);
  const T* src = in + r * n;
  Op op;
  T acc = init;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc = op(acc, src[j]);
  acc = block_reduce(acc, op, init);
  if (threadIdx.x == 0) partial[r * gridDim.x + s] = acc;
}

// Thread per output o = r * inner + c; blockIdx.y selects a chunk of n (out has one slab of
// outer * inner results per chunk).
template <typename T, typename Op>
__global__ void reduce_cols_kernel(const T* in, T* out, int64_t outer, int64_t n, int64_t inner,
                                   int64_t chunk, T init) {
  int64_t outputs = outer * inner;
  int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk, end = min(n, begin + chunk);
  T* dst = out + static_cast<int64_t>(blockIdx.y) * outputs;
  Op op;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t r = o / inner, c = o % inner;
    const T* src = in + r * n * inner + c;
    T acc = init;
    for (int64_t j = begin; j < end; ++j) acc = op(acc, src[j * inner]);
    dst[o] = acc;
  }
}

template <typename T, typename Op>
__global__ void fill_value_kernel(T* out, int64_t n, T value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = value;
}

template <typename T, typename Op>
void reduce_impl(CudaBackend& be, const T* in, T* out, int64_t outer, int64_t n, int64_t inner) {
  cudaStream_t st = be.stream();
  T init = host_init<T, Op>();
  int64_t outputs = outer * inner;
  if (outputs == 0) return;
  if (n == 0) {
    fill_value_kernel<T, Op><<<grid_for(outputs), kBlock, 0, st>>>(out, outputs, init);
    return;
  }
  if (inner == 1 && n > 16) {
    if (outer < 256 && n >= 32768) {
      int64_t splits = std::min<int64_t>(1024, (n + 8191) / 8192);
      int64_t chunk = (n + splits - 1) / splits;
      splits = (n + chunk - 1) / chunk;
      Scratch tmp(be, sizeof(T) * outer * splits);
      dim3 grid(static_cast<unsigned int>(splits), static_cast<unsigned int>(outer));
      reduce_rows_partial_kernel<T, Op><<<grid, kBlock, 0, st>>>(in, tmp.as<T>(), n, chunk, init);
      be.check_launch("reduce");
      reduce_impl<T, Op>(be, tmp.as<T>(), out, outer, splits, 1);
      return;
    }
    launch_rows(outer, n, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      reduce_rows_kernel<G, T, Op><<<blocks, threads, 0, st>>>(in, out, outer, n, init);
    });
    return;
  }
  if (outputs < 32768 && n >= 64) {
    int64_t splits = std::max<int64_t>(2, 131072 / outputs);
    splits = std::min<int64_t>({splits, (n + 15) / 16, 65535});
    int64_t chunk = (n + splits - 1) / splits;
    splits = (n + chunk - 1) / chunk;
    Scratch tmp(be, sizeof(T) * splits * outputs);
    dim3 grid(grid_for(outputs), static_cast<unsigned int>(splits));
    reduce_cols_kernel<T, Op>
        <<<grid, kBlock, 0, st>>>(in, tmp.as<T>(), outer, n, inner, chunk, init);
    be.check_launch("reduce");
    // The partials are [splits, outputs]: reduce their middle axis.
    reduce_impl<T, Op>(be, tmp.as<T>(), out, 1, splits, outputs);
    return;
  }
  dim3 grid(grid_for(outputs), 1);
  reduce_cols_kernel<T, Op><<<grid, kBlock, 0, st>>>(in, out, outer, n, inner, n, init);
}

// ---- sum_squares -------------------------------------------------------------------------------

// Block b sums x² over its grid-stride share of x in float64 into partial[b]; a fixed grid, so the
// order (and the result) does not change from call to call.
template <typename T>
__global__ void sum_squares_partial_kernel(const T* x, int64_t n, double* partial) {
  double acc = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
  }
  acc = block_reduce(acc, SumOp{}, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// out[0] = the blocks' partial sums added (one block).
template <typename O>
__global__ void sum_partials_kernel(const double* partial, int blocks, O* out) {
  double acc = 0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) acc += partial[i];
  acc = block_reduce(acc, SumOp{}, 0.0);
  if (threadIdx.x == 0) out[0] = static_cast<O>(acc);
}

// ---- logcumsumexp ------------------------------------------------------------------------------

// log(exp(a) + exp(b)) written as the CPU writes it.
template <typename T>
__device__ __forceinline__ T log_add_exp(T a, T b) {
  T hi = a > b ? a : b;
  if (hi == -d_inf<T>()) return hi;
  return hi + d_log(d_exp(a - hi) + d_exp(b - hi));
}

template <typename T>
__global__ void lcse_cols_kernel(const T* in, T* out, int64_t outer, int64_t n, int64_t inner) {
  int64_t columns = outer * inner;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < columns;
       col += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t start = (col / inner) * n * inner + col % inner;
    scan::logcumsumexp_column<CudaMath>(in + start, out + start, n, inner);
  }
}

template <typename T>
__global__ void lcse_warp_kernel(const T* in, T* out, int64_t outer, int64_t n, int64_t inner) {
  const int lane = threadIdx.x & 31;
  int64_t columns = outer * inner;
  int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
       col < columns; col += warps) {
    int64_t r = col / inner, c = col % inner;
    const T* src = in + r * n * inner + c;
    T* dst = out + r * n * inner + c;
    T carry = -d_inf<T>();
    for (int64_t base = 0; base < n; base += 32) {
      int64_t j = base + lane;
      T v = j < n ? src[j * inner] : -d_inf<T>();
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        T other = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v = log_add_exp(other, v);
      }
      T y = log_add_exp(carry, v);
      if (j < n) dst[j * inner] = y;
      carry = __shfl_sync(0xffffffffu, y, 31);
    }
  }
}

template <typename T>
__global__ void lcse_backward_cols_kernel(const T* x, const T* y, const T* dy, T* dx, int64_t outer,
                                          int64_t n, int64_t inner) {
  int64_t columns = outer * inner;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < columns;
       col += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t start = (col / inner) * n * inner + col % inner;
    scan::logcumsumexp_backward_column<CudaMath>(x + start, y + start, dy + start, dx + start, n,
                                                 inner);
  }
}

// s_j = b_j + a_j s_{j+1} with a_j = exp(y_j - y_{j+1}) (0 past the end), b_j = dy_j. Each lane
// holds the map of its element; a reverse shuffle scan composes lane l's map with those after it
// in the tile, then the tile's first s is carried into the tile before it.
template <typename T>
__global__ void lcse_backward_warp_kernel(const T* x, const T* y, const T* dy, T* dx, int64_t outer,
                                          int64_t n, int64_t inner) {
  const int lane = threadIdx.x & 31;
  int64_t columns = outer * inner;
  int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
       col < columns; col += warps) {
    int64_t r = col / inner, c = col % inner;
    int64_t off = r * n * inner + c;
    T carry = 0;
    int64_t tiles = (n + 31) / 32;
    for (int64_t t = tiles - 1; t >= 0; --t) {
      int64_t j = t * 32 + lane;
      T A = 1, B = 0, yj = 0;
      if (j < n) {
        yj = y[off + j * inner];
        A = j + 1 < n ? d_exp(yj - y[off + (j + 1) * inner]) : T(0);
        B = dy[off + j * inner];
      }
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        T A2 = __shfl_down_sync(0xffffffffu, A, offset);
        T B2 = __shfl_down_sync(0xffffffffu, B, offset);
        if (lane + offset < 32) {
          B = B + A * B2;
          A = A * A2;
        }
      }
      T s = B + A * carry;
      if (j < n) dx[off + j * inner] = s * d_exp(x[off + j * inner] - yj);
      carry = __shfl_sync(0xffffffffu, s, 0);
    }
  }
}

bool warp_scan_for(int64_t outer, int64_t n, int64_t inner) {
  return n >= 64 && (inner == 1 || outer * inner < 8192);
}

unsigned int warp_grid(int64_t columns) {
  int64_t blocks = (columns + 7) / 8;  // 8 warps per 256-thread block
  return static_cast<unsigned int>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 65536));
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::reduce(ReduceOp op, const View& x, int64_t outer, int64_t n, int64_t inner,
                         const View& out) {
  if (outer * inner == 0) return;
  activate();
  dispatch_floating(x.dtype, "reduce", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* o = out.as<T>();
    switch (op) {
      case ReduceOp::Sum:
        reduce_impl<T, SumOp>(*this, in, o, outer, n, inner);
        break;
      case ReduceOp::Max:
        reduce_impl<T, MaxOp>(*this, in, o, outer, n, inner);
        break;
      case ReduceOp::Min:
        reduce_impl<T, MinOp>(*this, in, o, outer, n, inner);
        break;
    }
  });
  check_launch("reduce");
}

void CudaBackend::sum_squares(const View& x, const View& out) {
  activate();
  const int64_t n = x.numel();
  const int blocks =
      static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(1, (n + 4095) / 4096)));
  Scratch partial(*this, sizeof(double) * blocks);
  dispatch_floating(x.dtype, "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    sum_squares_partial_kernel<T>
        <<<blocks, kBlock, 0, stream_>>>(x.as<T>(), n, partial.as<double>());
  });
  check_launch("sum_squares");
  dispatch_floating(out.dtype, "sum_squares", [&](auto tag) {
    using O = decltype(tag);
    sum_partials_kernel<O><<<1, kBlock, 0, stream_>>>(partial.as<double>(), blocks, out.as<O>());
  });
  check_launch("sum_squares");
}

void CudaBackend::logcumsumexp(const View& x, int64_t outer, int64_t n, int64_t inner,
                               const View& y) {
  int64_t columns = outer * inner;
  if (columns == 0 || n == 0) return;
  activate();
  dispatch_floating(x.dtype, "logcumsumexp", [&](auto tag) {
    using T = decltype(tag);
    if (warp_scan_for(outer, n, inner))
      lcse_warp_kernel<T>
          <<<warp_grid(columns), 256, 0, stream_>>>(x.as<T>(), y.as<T>(), outer, n, inner);
    else
      lcse_cols_kernel<T>
          <<<grid_for(columns), kBlock, 0, stream_>>>(x.as<T>(), y.as<T>(), outer, n, inner);
  });
  check_launch("logcumsumexp");
}

void CudaBackend::logcumsumexp_backward(const View& x, const View& y, const View& dy, int64_t outer,
                                        int64_t n, int64_t inner, const View& dx) {
  int64_t columns = outer * inner;
  if (columns == 0 || n == 0) return;
  activate();
  dispatch_floating(x.dtype, "logcumsumexp_backward", [&](auto tag) {
    using T = decltype(tag);
    if (warp_scan_for(outer, n, inner))
      lcse_backward_warp_kernel<T><<<warp_grid(columns), 256, 0, stream_>>>(
          x.as<T>(), y.as<T>(), dy.as<T>(), dx.as<T>(), outer, n, inner);
    else
      lcse_backward_cols_kernel<T><<<grid_for(columns), kBlock, 0, stream_>>>(
          x.as<T>(), y.as<T>(), dy.as<T>(), dx.as<T>(), outer, n, inner);
  });
  check_launch("logcumsumexp_backward");
}

}  // namespace mixlab
