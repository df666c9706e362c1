// Shared pieces of the CUDA kernel files: launch shapes, device math with one name for float
// and double, warp and block reductions, strided index walking, and scratch buffers from the
// caching allocator (dtype dispatch is core/dtype_dispatch.h). Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "backends/backend.h"
#include "backends/strided_layout.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "core/dtype_dispatch.h"
#include "core/error.h"

namespace mixlab::cuda {

// ---- launch shapes ----------------------------------------------------------------------------

constexpr int kBlock = 256;
// Blocks for a grid-stride loop over n items: enough to fill the GPU, never past what is useful.
inline unsigned int grid_for(int64_t n, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  if (blocks < 1) blocks = 1;
  const int64_t cap = 65536;  // grid-stride loops cover the rest
  return static_cast<unsigned int>(blocks < cap ? blocks : cap);
}

// Row kernels use a warp per row up to this many columns, a block per row beyond.
constexpr int64_t kWarpRowMaxCols = 1024;
inline int block_threads_for_cols(int64_t cols) { return cols <= 4096 ? 256 : 512; }

// ---- device math: one spelling for float and double ---------------------------------------------

__device__ __forceinline__ float d_exp(float x) { return expf(x); }
__device__ __forceinline__ double d_exp(double x) { return exp(x); }
__device__ __forceinline__ float d_log(float x) { return logf(x); }
__device__ __forceinline__ double d_log(double x) { return log(x); }
// x·y rounded before anything is added to it: nvcc's default --fmad=true would fuse a plain
// product into a following subtraction, and a value recomputed that way can differ from the one
// computed and stored elsewhere by half an ulp of the product (the attention backward's scores
// against the forward's log-sum-exp: exp(16384) = inf at scores of 4e11).
__device__ __forceinline__ float d_mul_rounded(float x, float y) { return __fmul_rn(x, y); }
__device__ __forceinline__ double d_mul_rounded(double x, double y) { return __dmul_rn(x, y); }
__device__ __forceinline__ float d_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double d_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float d_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double d_abs(double x) { return fabs(x); }
__device__ __forceinline__ float d_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double d_tanh(double x) { return tanh(x); }
// The accurate forms (not __sinf): the arguments of the state-space kernels reach π·n·Δ.
__device__ __forceinline__ float d_sin(float x) { return sinf(x); }
__device__ __forceinline__ double d_sin(double x) { return sin(x); }
__device__ __forceinline__ float d_cos(float x) { return cosf(x); }
__device__ __forceinline__ double d_cos(double x) { return cos(x); }
__device__ __forceinline__ float d_erf(float x) { return erff(x); }
__device__ __forceinline__ double d_erf(double x) { return erf(x); }
__device__ __forceinline__ float d_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double d_pow(double x, double y) { return pow(x, y); }

template <typename T>
__device__ __forceinline__ T d_inf() {
  return std::numeric_limits<T>::infinity();
}

// The CPU's comparators (NaN never replaces the running value).
struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T acc, T v) const {
    return v > acc ? v : acc;
  }
};
struct MinOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T acc, T v) const {
    return v < acc ? v : acc;
  }
};

// ---- warp and block reductions ---------------------------------------------------------------

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block gets the result. All threads must call it (it synchronises).
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity) {
  __shared__ T partial[33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // an earlier call may still be reading `partial`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? partial[lane] : identity;
    w = warp_reduce(w, op);
    if (lane == 0) partial[32] = w;
  }
  __syncthreads();
  return partial[32];
}

// A row handled by one warp (blockDim.x a multiple of 32, blockDim.x / 32 rows per block) or by
// one whole block. Kernels written against this interface work with either.
struct WarpPerRow {
  static __device__ __forceinline__ int64_t row() {
    return static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  }
  static __device__ __forceinline__ int rank() { return threadIdx.x & 31; }
  static __device__ __forceinline__ int size() { return 32; }
  template <typename T, typename Op>
  static __device__ __forceinline__ T reduce(T v, Op op, T) {
    return warp_reduce(v, op);
  }
  static unsigned int blocks(int64_t rows, int threads) {
    int64_t per = threads / 32;
    return static_cast<unsigned int>((rows + per - 1) / per);
  }
};
struct BlockPerRow {
  static __device__ __forceinline__ int64_t row() { return blockIdx.x; }
  static __device__ __forceinline__ int rank() { return threadIdx.x; }
  static __device__ __forceinline__ int size() { return blockDim.x; }
  template <typename T, typename Op>
  static __device__ __forceinline__ T reduce(T v, Op op, T identity) {
    return block_reduce(v, op, identity);
  }
  static unsigned int blocks(int64_t rows, int) { return static_cast<unsigned int>(rows); }
};

// Launches kernel<Group> with a warp per row for short rows, a block per row for long ones.
// `launch(group_tag, blocks, threads)` does the actual <<<>>>.
template <typename L>
void launch_rows(int64_t rows, int64_t cols, const L& launch) {
  if (rows <= 0) return;
  check(rows < (int64_t(1) << 31) * 8, "cuda row kernel: too many rows (", rows, ")");
  if (cols <= kWarpRowMaxCols) {
    launch(WarpPerRow{}, WarpPerRow::blocks(rows, 256), 256);
  } else {
    int threads = block_threads_for_cols(cols);
    launch(BlockPerRow{}, BlockPerRow::blocks(rows, threads), threads);
  }
}

// A row's elements for one thread of its group: with K > 0, the thread's K elements (columns
// rank, rank + size, ...) are loaded into registers at construction, all loads issued together,
// and every later pass reads the registers; with K == 0 each pass reads memory again (rows too
// wide for registers). Either way `each(f)` visits the thread's columns in the same order as
// the plain strided loop, so a kernel gives the same bits with or without the cache.
template <typename G, int K, typename T>
struct RowCache {
  const T* p;
  int64_t cols;
  T v[K > 0 ? K : 1];

  __device__ __forceinline__ RowCache(const T* row, int64_t n) : p(row), cols(n) {
    if constexpr (K > 0) {
#pragma unroll
      for (int j = 0; j < K; ++j) {
        int64_t i = G::rank() + static_cast<int64_t>(j) * G::size();
        v[j] = i < cols ? p[i] : T(0);
      }
    }
  }
  // f(column, value) for each of this thread's columns.
  template <typename F>
  __device__ __forceinline__ void each(F&& f) const {
    if constexpr (K > 0) {
#pragma unroll
      for (int j = 0; j < K; ++j) {
        int64_t i = G::rank() + static_cast<int64_t>(j) * G::size();
        if (i < cols) f(i, v[j]);
      }
    } else {
      for (int64_t i = G::rank(); i < cols; i += G::size()) f(i, p[i]);
    }
  }
  // f(column, value, other's value): two rows of the same length walked together.
  template <typename F>
  __device__ __forceinline__ void each_with(const RowCache& other, F&& f) const {
    if constexpr (K > 0) {
#pragma unroll
      for (int j = 0; j < K; ++j) {
        int64_t i = G::rank() + static_cast<int64_t>(j) * G::size();
        if (i < cols) f(i, v[j], other.v[j]);
      }
    } else {
      for (int64_t i = G::rank(); i < cols; i += G::size()) f(i, p[i], other.p[i]);
    }
  }
};

// launch_rows with a register cache size for RowCache: `launch(group_tag, k_tag, blocks,
// threads)`, k_tag a std::integral_constant<int, K>. A warp per row caches up to 4, 16 or 32
// elements a lane (rows of up to 128, 512 or 1024), a block per row 16 a thread (rows of up to
// 4096 with 256 threads, 8192 with 512); other rows read memory on every pass (K = 0). MaxK is
// the largest cache a kernel gains from, measured on an H200 (bench_cuda): caches of 16 and 32
// took the forward kernels' occupancy (registers) and made them slower than re-reading rows that
// the L1 cache still holds, while the backward kernels, which read two rows, gained at every size.
// Few K values keep compile time down: a larger K than needed costs only predicated-off loads.
template <int MaxK, typename L>
void launch_cached_rows(int64_t rows, int64_t cols, const L& launch) {
  using std::integral_constant;
  launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
    if constexpr (std::is_same_v<decltype(group), WarpPerRow>) {
      int64_t per_lane = (cols + 31) / 32;
      if (per_lane <= 4) {
        launch(group, integral_constant<int, 4>{}, blocks, threads);
      } else if constexpr (MaxK >= 32) {
        if (per_lane <= 16)
          launch(group, integral_constant<int, 16>{}, blocks, threads);
        else
          launch(group, integral_constant<int, 32>{}, blocks, threads);
      } else {
        launch(group, integral_constant<int, 0>{}, blocks, threads);
      }
    } else if constexpr (MaxK >= 32) {
      if ((cols + threads - 1) / threads <= 16)
        launch(group, integral_constant<int, 16>{}, blocks, threads);
      else
        launch(group, integral_constant<int, 0>{}, blocks, threads);
    } else {
      launch(group, integral_constant<int, 0>{}, blocks, threads);
    }
  });
}
// The two policies rows.cu uses.
constexpr int kCacheShortRows = 4;  // forward kernels: rows of up to 128 only
constexpr int kCacheRows = 32;      // backward kernels: every row that fits

// ---- strided walking (the GPU twin of backends/cpu/strided.h) --------------------------------

// N views of one shape walked together, coalesced by backends/strided_layout.h.
template <int N>
struct Strided : StridedLayout<N> {
  using StridedLayout<N>::ndim;
  using StridedLayout<N>::shape;
  using StridedLayout<N>::strides;
  bool contiguous = false;  // every view is dense row-major over the whole shape

  Strided(const View& shape_of, const std::array<const View*, N>& views)
      : StridedLayout<N>(shape_of, views) {
    contiguous = ndim == 1;
    for (int k = 0; k < N && contiguous; ++k) contiguous = strides[k][0] == 1;
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
  // Whether every linear index and offset fits 32-bit arithmetic (faster division).
  bool fits_32bit() const {
    const int64_t limit = (int64_t(1) << 31) - 1;
    if (numel() > limit) return false;
    for (int k = 0; k < N; ++k) {
      int64_t span = 0;
      for (int d = 0; d < ndim; ++d) {
        int64_t s = strides[k][d] < 0 ? -strides[k][d] : strides[k][d];
        span += s * (shape[d] - 1);
      }
      if (span > limit) return false;
    }
    return true;
  }
};

// The element offsets of linear index i (row-major over the coalesced shape) in each view.
template <int N, typename Index>
struct StridedIndexer {
  int ndim;
  Index shape[kMaxDims];
  Index strides[N][kMaxDims];

  explicit StridedIndexer(const Strided<N>& s) : ndim(s.ndim) {
    for (int d = 0; d < kMaxDims; ++d) {
      shape[d] = d < s.ndim ? static_cast<Index>(s.shape[d]) : Index(1);
      for (int k = 0; k < N; ++k)
        strides[k][d] = d < s.ndim ? static_cast<Index>(s.strides[k][d]) : Index(0);
    }
  }

  __device__ __forceinline__ void offsets(Index i, Index (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
      // Unrolled over every possible axis so the arrays are indexed statically (read straight
      // from the kernel's parameter space, no local-memory copy).
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d < ndim) {
        Index idx = i % shape[d];
        i /= shape[d];
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] += idx * strides[k][d];
      }
    }
  }
};

// ---- scratch memory ---------------------------------------------------------------------------

// A temporary device buffer from the caching allocator, returned when it goes out of scope.
// Freeing right after queueing the kernels that use it is safe (single stream, see allocator.h).
class Scratch {
 public:
  Scratch(CudaBackend& backend, size_t bytes)
      : backend_(backend), bytes_(bytes), ptr_(bytes ? backend.allocate(bytes) : nullptr) {}
  ~Scratch() {
    if (ptr_) backend_.deallocate(ptr_, bytes_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* get() const { return ptr_; }

 private:
  CudaBackend& backend_;
  size_t bytes_;
  void* ptr_;
};

// Row i of (b, h) = item of a [B, H, rows, cols] view whose last axis has stride 1 (the
// attention cores' per-head operands).
template <typename T>
struct HeadRows {
  T* data;
  int64_t s0, s1, s2, heads;
  __device__ __forceinline__ T* row(int64_t item, int64_t i) const {
    return data + (item / heads) * s0 + (item % heads) * s1 + i * s2;
  }
};
template <typename T>
HeadRows<T> head_rows(const View& v) {
  return {v.as<T>(), v.strides[0], v.strides[1], v.strides[2], v.shape[1]};
}

}  // namespace mixlab::cuda
