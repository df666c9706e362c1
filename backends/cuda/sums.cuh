// Sums along the long axis of a matrix, deterministic and spread over the whole GPU: the bias
// gradients (column sums of dY [rows, cols]), scale_shift's (of dY x), gemm_epilogue's RowSums
// (sums of op(A)'s rows) and the layer norm's partial rows.
// One thread walking a whole column or row in order, as these once did, leaves the GPU nearly
// idle: a bias gradient over 6,272 rows took hundreds of microseconds on an H200.
//
// Column sums go in two fixed-order stages: blocks of 32 columns x 8 row-lanes sum chunks of
// rows into partial rows, then column_sums_kernel adds the partial rows. Row sums of a
// row-major matrix take a warp per row (a block per row for long ones). Included by .cu files.
#pragma once
#include <algorithm>

#include "backends/cuda/common.cuh"

namespace mixlab::cuda {

// partial[chunk * cols + c] = sum of a[r * ld + c] (times b[r * ld + c] when b is given) over
// the chunk's rows. Block (32, 8): column c = blockIdx.x * 32 + tx, the chunk blockIdx.y's rows
// strided by 8 over ty, the 8 lanes added in ty order.
template <typename T>
__global__ void column_chunk_sums_kernel(const T* a, const T* b, int64_t ld, int64_t rows,
                                         int64_t cols, int64_t rows_per_chunk, T* partial) {
  __shared__ T lanes[8][33];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + tx;
  int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  int64_t end = min(rows, begin + rows_per_chunk);
  T acc = 0;
  if (c < cols)
    for (int64_t r = begin + ty; r < end; r += 8)
      acc += b ? a[r * ld + c] * b[r * ld + c] : a[r * ld + c];
  lanes[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && c < cols) {
    T total = 0;
    for (int k = 0; k < 8; ++k) total += lanes[k][tx];
    partial[static_cast<int64_t>(blockIdx.y) * cols + c] = total;
  }
}

// out[c] = sum over chunks of partial[chunk * cols + c]. Block (32, 32): the 32 threads of a
// column take chunks ty, ty + 32, ... (32 loads in flight where one thread walking all chunks
// had one), then thread ty = 0 adds their sums in ty order.
template <typename T>
__global__ void column_sums_kernel(const T* partial, T* out, int64_t chunks, int64_t cols) {
  __shared__ T sums[32][33];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + tx;
  T acc = 0;
  if (c < cols)
    for (int64_t k = ty; k < chunks; k += 32) acc += partial[k * cols + c];
  sums[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && c < cols) {
    T total = 0;
    for (int k = 0; k < 32; ++k) total += sums[k][tx];
    out[c] = total;
  }
}

// How column sums split a [rows, cols] matrix: tiles of 32 columns by chunks of rows, enough
// blocks (tiles x chunks, about 1024) to fill the GPU, chunks of at least 32 rows.
struct ColumnChunks {
  int64_t tiles, chunks, rows_per_chunk;
  dim3 grid() const {
    return dim3(static_cast<unsigned int>(tiles), static_cast<unsigned int>(chunks));
  }
};
inline ColumnChunks column_chunks(int64_t rows, int64_t cols) {
  int64_t tiles = (cols + 31) / 32;
  int64_t chunks = std::min<int64_t>((rows + 31) / 32, std::max<int64_t>(1, 1024 / tiles));
  chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, 65535));
  int64_t per = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
  chunks = std::max<int64_t>(1, (rows + per - 1) / per);
  return {tiles, chunks, per};
}

// out[c] = sum over chunks of partial[chunk * cols + c] (column_sums_kernel), the second stage.
template <typename T>
void add_partial_rows(cudaStream_t stream, const T* partial, int64_t chunks, int64_t cols, T* out) {
  column_sums_kernel<T><<<static_cast<unsigned int>((cols + 31) / 32), dim3(32, 32), 0, stream>>>(
      partial, out, chunks, cols);
}

// out[c] = sum over r < rows of a[r * ld + c] (times b[r * ld + c] when b is not null).
template <typename T>
void column_sums(CudaBackend& backend, const T* a, const T* b, int64_t ld, int64_t rows,
                 int64_t cols, T* out) {
  if (cols == 0) return;
  cudaStream_t stream = backend.stream();
  ColumnChunks plan = column_chunks(rows, cols);
  if (plan.chunks == 1) {  // the chunk's sums are the answer
    column_chunk_sums_kernel<T>
        <<<plan.grid(), dim3(32, 8), 0, stream>>>(a, b, ld, rows, cols, plan.rows_per_chunk, out);
    return;
  }
  Scratch partial(backend, sizeof(T) * plan.chunks * cols);
  column_chunk_sums_kernel<T><<<plan.grid(), dim3(32, 8), 0, stream>>>(
      a, b, ld, rows, cols, plan.rows_per_chunk, partial.as<T>());
  add_partial_rows<T>(stream, partial.as<T>(), plan.chunks, cols, out);
}

// out[i] = sum over p of a[i * ld + p], a row per warp or block, lanes in a fixed order.
template <typename G, typename T>
__global__ void row_sums_kernel(const T* a, int64_t ld, int64_t rows, int64_t cols, T* out) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* p = a + row * ld;
  T acc = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) acc += p[i];
  acc = G::reduce(acc, SumOp{}, T(0));
  if (G::rank() == 0) out[row] = acc;
}

template <typename T>
void row_sums(CudaBackend& backend, const T* a, int64_t ld, int64_t rows, int64_t cols, T* out) {
  launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
    using G = decltype(group);
    row_sums_kernel<G, T><<<blocks, threads, 0, backend.stream()>>>(a, ld, rows, cols, out);
  });
}

}  // namespace mixlab::cuda
