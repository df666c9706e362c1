// The depthwise token convolution of lightconv and dynconv on CUDA (backends/kernels.def,
// "depthwise token convolution"): one thread per element of the output (and of dg), reading the
// K neighbouring rows of g straight from memory; dtaps as one block per (taps block, head, tap)
// reducing over the rows that share those taps and the head's channels, in a fixed order
// (deterministic).
#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

struct ConvDims {
  int64_t batch, n, d, heads, k, head_dim;
  bool per_item, per_position;
};

ConvDims conv_dims(const View& g, const View& taps) {
  return {g.shape[0],        g.shape[1],       g.shape[2],
          taps.shape[2],     taps.shape[3],    g.shape[2] / taps.shape[2],
          taps.shape[0] > 1, taps.shape[1] > 1};
}

__device__ __forceinline__ int64_t slot_of(const ConvDims& s, int64_t b, int64_t t) {
  return (s.per_item ? b : 0) * (s.per_position ? s.n : 1) + (s.per_position ? t : 0);
}

// out[b, t, c] = Σ_m taps[slot(b, t), h(c), m] · g[b, t + m − left, c].
template <typename T>
__global__ void token_conv_kernel(const T* g, const T* taps, T* out, ConvDims s, int64_t left,
                                  int64_t total) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t c = i % s.d, r = i / s.d, t = r % s.n, b = r / s.n;
    const T* w = taps + (slot_of(s, b, t) * s.heads + c / s.head_dim) * s.k;
    T acc = 0;
    for (int64_t m = 0; m < s.k; ++m) {
      int64_t src = t + m - left;
      if (src >= 0 && src < s.n) acc += w[m] * g[(b * s.n + src) * s.d + c];
    }
    out[i] = acc;
  }
}

// dg[b, row, c] = Σ_m taps[slot(b, t), h(c), m] · dout[b, t, c], t = row − m + left.
template <typename T>
__global__ void token_conv_dg_kernel(const T* taps, const T* dout, T* dg, ConvDims s, int64_t left,
                                     int64_t total) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t c = i % s.d, r = i / s.d, row = r % s.n, b = r / s.n, h = c / s.head_dim;
    T acc = 0;
    for (int64_t m = 0; m < s.k; ++m) {
      int64_t t = row - m + left;
      if (t >= 0 && t < s.n)
        acc += taps[(slot_of(s, b, t) * s.heads + h) * s.k + m] * dout[(b * s.n + t) * s.d + c];
    }
    dg[i] = acc;
  }
}

// dtaps[slot, h, m] = Σ dout[b, t, c] · g[b, t + m − left, c] over the rows (b, t) of the slot
// and the channels c of head h: one block per entry.
template <typename T>
__global__ void token_conv_dtaps_kernel(const T* g, const T* dout, T* dtaps, ConvDims s,
                                        int64_t left, int64_t entries) {
  const int64_t items = s.per_item ? 1 : s.batch, positions = s.per_position ? 1 : s.n;
  const int64_t terms = items * positions * s.head_dim;
  for (int64_t e = blockIdx.x; e < entries; e += gridDim.x) {
    int64_t m = e % s.k, h = (e / s.k) % s.heads, slot = e / (s.k * s.heads);
    int64_t b0 = s.per_item ? slot / (s.per_position ? s.n : 1) : 0;
    int64_t t0 = s.per_position ? slot % s.n : 0;
    T acc = 0;
    for (int64_t j = threadIdx.x; j < terms; j += blockDim.x) {
      int64_t c = h * s.head_dim + j % s.head_dim, rest = j / s.head_dim;
      int64_t t = t0 + rest % positions, b = b0 + rest / positions, src = t + m - left;
      if (src >= 0 && src < s.n)
        acc += dout[(b * s.n + t) * s.d + c] * g[(b * s.n + src) * s.d + c];
    }
    acc = block_reduce(acc, SumOp{}, T(0));
    if (threadIdx.x == 0) dtaps[e] = acc;
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::token_conv(const View& g, const View& taps, int64_t left, const View& out) {
  int64_t total = g.numel();
  if (total == 0) return;
  activate();
  ConvDims s = conv_dims(g, taps);
  dispatch_floating(g.dtype, "token_conv", [&](auto tag) {
    using T = decltype(tag);
    token_conv_kernel<T><<<grid_for(total), kBlock, 0, stream_>>>(g.as<T>(), taps.as<T>(),
                                                                  out.as<T>(), s, left, total);
  });
  check_launch("token_conv");
}

void CudaBackend::token_conv_backward(const View& g, const View& taps, const View& dout,
                                      int64_t left, const View& dg, const View& dtaps) {
  int64_t total = g.numel(), entries = taps.numel();
  if (total == 0 && entries == 0) return;
  activate();
  ConvDims s = conv_dims(g, taps);
  dispatch_floating(g.dtype, "token_conv_backward", [&](auto tag) {
    using T = decltype(tag);
    if (total > 0)
      token_conv_dg_kernel<T><<<grid_for(total), kBlock, 0, stream_>>>(taps.as<T>(), dout.as<T>(),
                                                                       dg.as<T>(), s, left, total);
    if (entries > 0) {
      constexpr int kThreads = 128;
      unsigned int blocks = static_cast<unsigned int>(entries < 65536 ? entries : 65536);
      token_conv_dtaps_kernel<T><<<blocks, kThreads, 0, stream_>>>(g.as<T>(), dout.as<T>(),
                                                                   dtaps.as<T>(), s, left, entries);
    }
  });
  check_launch("token_conv_backward");
}

}  // namespace mixlab
