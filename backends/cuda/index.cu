// Row gather (embedding lookup) and its backward, the row scatter-add. Reference:
// backends/cpu/cpu_index.cpp.
//
// scatter_add_rows is deterministic and matches the CPU bit for bit: the ids are sorted with a
// stable radix sort (CUB) carrying their positions, and one block per distinct id adds that id's
// gradient rows in increasing position order, onto the table's current value, exactly the order
// of the CPU's sequential loop. No atomics, so repeated runs give identical gradients.
#include <cub/cub.cuh>

#include <algorithm>
#include <climits>

#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

// Copies words of the element's size: one kernel serves float, double and int32 tables.
template <typename W>
__global__ void gather_rows_kernel(const W* table, const int32_t* ids, W* out, int64_t count,
                                   int64_t dim, int64_t rows) {
  int64_t total = count * dim;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t i = e / dim, c = e - i * dim;
    const int64_t id = ids[i];
    // A bad index (its check reports it at the next wait) reads nothing outside the table.
    out[e] = id >= 0 && id < rows ? table[id * dim + c] : W(0);
  }
}

__global__ void iota_kernel(int32_t* out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = static_cast<int32_t>(i);
}

// keys: ids sorted ascending; pos: their original positions (ascending within one id).
template <typename T>
__global__ void scatter_segments_kernel(const uint32_t* keys, const int32_t* pos, const T* grad,
                                        T* dtable, int64_t count, int64_t dim, int64_t vocab) {
  for (int64_t p = blockIdx.x; p < count; p += gridDim.x) {
    uint32_t id = keys[p];
    if (p > 0 && keys[p - 1] == id) continue;  // not the start of a segment
    // A bad index (negative ones read as large unsigned) adds nothing: its check reports it.
    if (static_cast<int64_t>(id) >= vocab) continue;
    int64_t e = p + 1;
    while (e < count && keys[e] == id) ++e;
    T* dst = dtable + static_cast<int64_t>(id) * dim;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      T acc = dst[c];
      int64_t q = p;
      // Loads of four rows in flight, added strictly in order.
      for (; q + 4 <= e; q += 4) {
        T g0 = grad[static_cast<int64_t>(pos[q]) * dim + c];
        T g1 = grad[static_cast<int64_t>(pos[q + 1]) * dim + c];
        T g2 = grad[static_cast<int64_t>(pos[q + 2]) * dim + c];
        T g3 = grad[static_cast<int64_t>(pos[q + 3]) * dim + c];
        acc += g0;
        acc += g1;
        acc += g2;
        acc += g3;
      }
      for (; q < e; ++q) acc += grad[static_cast<int64_t>(pos[q]) * dim + c];
      dst[c] = acc;
    }
  }
}

int bits_for(int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (int64_t(1) << bits) < vocab) ++bits;
  return bits;
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::gather_rows(const View& table, const View& idx, const View& out, int64_t count,
                              int64_t dim) {
  int64_t total = count * dim;
  if (total == 0) return;
  activate();
  const int32_t* ids = idx.as<int32_t>();
  if (dtype_size(table.dtype) == 8)
    gather_rows_kernel<uint64_t><<<grid_for(total), kBlock, 0, stream_>>>(
        table.as<uint64_t>(), ids, out.as<uint64_t>(), count, dim, table.numel() / dim);
  else
    gather_rows_kernel<uint32_t><<<grid_for(total), kBlock, 0, stream_>>>(
        table.as<uint32_t>(), ids, out.as<uint32_t>(), count, dim, table.numel() / dim);
  check_launch("gather_rows");
}

void CudaBackend::scatter_add_rows(const View& grad, const View& idx, const View& dtable,
                                   int64_t count, int64_t dim) {
  if (count == 0 || dim == 0) return;
  check(count < INT_MAX, "cuda scatter_add_rows: ", count, " rows exceed the 32-bit limit");
  activate();
  int64_t vocab = std::max<int64_t>(1, dtable.numel() / dim);
  int end_bit = bits_for(vocab);
  int n = static_cast<int>(count);

  Scratch positions(*this, sizeof(int32_t) * count);
  Scratch keys_sorted(*this, sizeof(uint32_t) * count);
  Scratch pos_sorted(*this, sizeof(int32_t) * count);
  iota_kernel<<<grid_for(count), kBlock, 0, stream_>>>(positions.as<int32_t>(), count);
  check_launch("scatter_add_rows");

  // Ids are checked by the caller (check_indices); valid ones are non-negative, so their bits
  // read as unsigned sort the same. Bad ones (only their low end_bit bits are sorted) may land
  // among good ones and split a good id's run into two segments whose blocks then race on that
  // row: the kernel skips the bad ids, nothing leaves the table, and the step's results are
  // discarded with the check's Error at the next wait.
  const uint32_t* keys = static_cast<const uint32_t*>(idx.data);
  size_t temp_bytes = 0;
  MIXLAB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, keys, keys_sorted.as<uint32_t>(), positions.as<int32_t>(),
      pos_sorted.as<int32_t>(), n, 0, end_bit, stream_));
  Scratch temp(*this, std::max<size_t>(temp_bytes, 1));
  MIXLAB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      temp.get(), temp_bytes, keys, keys_sorted.as<uint32_t>(), positions.as<int32_t>(),
      pos_sorted.as<int32_t>(), n, 0, end_bit, stream_));

  int threads = dim >= 256 ? 256 : static_cast<int>((dim + 31) / 32 * 32);
  unsigned int blocks = static_cast<unsigned int>(std::min<int64_t>(count, 65536));
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto tag) {
    using T = decltype(tag);
    scatter_segments_kernel<T><<<blocks, threads, 0, stream_>>>(
        keys_sorted.as<uint32_t>(), pos_sorted.as<int32_t>(), grad.as<T>(), dtable.as<T>(), count,
        dim, dtable.numel() / dim);
  });
  check_launch("scatter_add_rows");
}

}  // namespace mixlab
