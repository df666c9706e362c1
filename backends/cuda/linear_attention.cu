// Linear attention's core without a causal mask, forward and backward. Reference:
// backends/cpu/cpu_linear_attention.cpp (the contract is in backends/kernels.def).
//
// Straightforward, correct before fast: a thread per element of each sum (S, z, the output,
// dq, dS, dz, dk, dv), each summing in a fixed order (no atomics: results repeat run to run),
// with S, z and the per-row denominators in scratch memory for the call.
#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

// s[item, c, f] = Σ_j k[item, j, c] · v[item, j, f] (f < e); with ones = true, z[item, c] = Σ_j
// k[item, j, c] instead (e = 1).
template <typename T>
__global__ void key_sums_kernel(HeadRows<const T> k, HeadRows<const T> v, T* s, int64_t items,
                                int64_t m, int64_t d, int64_t e, bool ones) {
  const int64_t total = items * d * e;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t f = idx % e, c = (idx / e) % d, item = idx / (d * e);
    T acc = 0;
    for (int64_t j = 0; j < m; ++j) acc += k.row(item, j)[c] * (ones ? T(1) : v.row(item, j)[f]);
    s[idx] = acc;
  }
}

// den[item, i] = q_i · z + eps; with dout given, dden[item, i] = −(dout_i · out_i) / den.
template <typename T>
__global__ void denominators_kernel(HeadRows<const T> q, const T* z, T eps, HeadRows<const T> out,
                                    HeadRows<const T> dout, T* den, T* dden, int64_t items,
                                    int64_t n, int64_t d, int64_t e) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < items * n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx % n, item = idx / n;
    T acc = 0;
    for (int64_t c = 0; c < d; ++c) acc += q.row(item, i)[c] * z[item * d + c];
    den[idx] = acc + eps;
    if (dden) {
      T g = 0;
      for (int64_t f = 0; f < e; ++f) g += dout.row(item, i)[f] * out.row(item, i)[f];
      dden[idx] = -g / den[idx];
    }
  }
}

// out[item, i, f] = Σ_c q[i, c] s[c, f] / den[i].
template <typename T>
__global__ void output_kernel(HeadRows<const T> q, const T* s, const T* den, HeadRows<T> out,
                              int64_t items, int64_t n, int64_t d, int64_t e) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < items * n * e;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t f = idx % e, i = (idx / e) % n, item = idx / (n * e);
    T acc = 0;
    for (int64_t c = 0; c < d; ++c) acc += q.row(item, i)[c] * s[(item * d + c) * e + f];
    out.row(item, i)[f] = acc / den[item * n + i];
  }
}

// dq[item, i, c] = Σ_f dout[i, f] / den[i] · s[c, f] + dden[i] · z[c].
template <typename T>
__global__ void dq_kernel(HeadRows<const T> dout, const T* s, const T* z, const T* den,
                          const T* dden, HeadRows<T> dq, int64_t items, int64_t n, int64_t d,
                          int64_t e) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < items * n * d;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = idx % d, i = (idx / d) % n, item = idx / (n * d);
    T acc = 0;
    for (int64_t f = 0; f < e; ++f) acc += dout.row(item, i)[f] * s[(item * d + c) * e + f];
    dq.row(item, i)[c] = acc / den[item * n + i] + dden[item * n + i] * z[item * d + c];
  }
}

// ds[item, c, f] = Σ_i q[i, c] dout[i, f] / den[i]; with dz set (e = 1), dz[item, c] = Σ_i
// dden[i] q[i, c] instead.
template <typename T>
__global__ void query_sums_kernel(HeadRows<const T> q, HeadRows<const T> dout, const T* den,
                                  const T* dden, T* ds, int64_t items, int64_t n, int64_t d,
                                  int64_t e) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < items * d * e;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t f = idx % e, c = (idx / e) % d, item = idx / (d * e);
    T acc = 0;
    for (int64_t i = 0; i < n; ++i)
      acc += q.row(item, i)[c] *
             (dden ? dden[item * n + i] : dout.row(item, i)[f] / den[item * n + i]);
    ds[idx] = acc;
  }
}

// dk[item, j, c] = Σ_f v[j, f] ds[c, f] + dz[c]; dv[item, j, f] = Σ_c k[j, c] ds[c, f].
template <typename T>
__global__ void key_grads_kernel(HeadRows<const T> k, HeadRows<const T> v, const T* ds, const T* dz,
                                 HeadRows<T> dk, HeadRows<T> dv, int64_t items, int64_t m,
                                 int64_t d, int64_t e) {
  const int64_t width = d + e;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < items * m * width;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t w = idx % width, j = (idx / width) % m, item = idx / (m * width);
    T acc = 0;
    if (w < d) {
      for (int64_t f = 0; f < e; ++f) acc += v.row(item, j)[f] * ds[(item * d + w) * e + f];
      dk.row(item, j)[w] = acc + dz[item * d + w];
    } else {
      const int64_t f = w - d;
      for (int64_t c = 0; c < d; ++c) acc += k.row(item, j)[c] * ds[(item * d + c) * e + f];
      dv.row(item, j)[f] = acc;
    }
  }
}

template <typename T>
void launch_key_sums(cudaStream_t stream, const View& k, const View& v, T* s, T* z, int64_t items,
                     int64_t m, int64_t d, int64_t e) {
  if (items * d * e > 0)
    key_sums_kernel<T><<<grid_for(items * d * e), kBlock, 0, stream>>>(
        head_rows<const T>(k), head_rows<const T>(v), s, items, m, d, e, false);
  if (items * d > 0)
    key_sums_kernel<T><<<grid_for(items * d), kBlock, 0, stream>>>(
        head_rows<const T>(k), head_rows<const T>(v), z, items, m, d, 1, true);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::linear_attention(const View& q, const View& k, const View& v, double eps,
                                   const View& out) {
  const int64_t items = q.shape[0] * q.shape[1], n = q.shape[2], d = q.shape[3];
  const int64_t m = k.shape[2], e = v.shape[3];
  if (items * n * e == 0) return;
  activate();
  dispatch_floating(q.dtype, "linear_attention", [&](auto tag) {
    using T = decltype(tag);
    Scratch s(*this, static_cast<size_t>(items * (d * e + d + n)) * sizeof(T));
    T* sums = s.as<T>();
    T* z = sums + items * d * e;
    T* den = z + items * d;
    launch_key_sums<T>(stream_, k, v, sums, z, items, m, d, e);
    denominators_kernel<T><<<grid_for(items * n), kBlock, 0, stream_>>>(
        head_rows<const T>(q), z, T(eps), head_rows<const T>(out), head_rows<const T>(out), den,
        nullptr, items, n, d, e);
    output_kernel<T><<<grid_for(items * n * e), kBlock, 0, stream_>>>(
        head_rows<const T>(q), sums, den, head_rows<T>(out), items, n, d, e);
  });
  check_launch("linear_attention");
}

void CudaBackend::linear_attention_backward(const View& q, const View& k, const View& v, double eps,
                                            const View& out, const View& dout, const View& dq,
                                            const View& dk, const View& dv) {
  const int64_t items = q.shape[0] * q.shape[1], n = q.shape[2], d = q.shape[3];
  const int64_t m = k.shape[2], e = v.shape[3];
  if (items == 0) return;
  activate();
  dispatch_floating(q.dtype, "linear_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    Scratch s(*this, static_cast<size_t>(items * (2 * d * e + 2 * d + 2 * n) + 1) * sizeof(T));
    T* sums = s.as<T>();
    T* z = sums + items * d * e;
    T* ds = z + items * d;
    T* dz = ds + items * d * e;
    T* den = dz + items * d;
    T* dden = den + items * n;
    launch_key_sums<T>(stream_, k, v, sums, z, items, m, d, e);
    if (items * n > 0)
      denominators_kernel<T><<<grid_for(items * n), kBlock, 0, stream_>>>(
          head_rows<const T>(q), z, T(eps), head_rows<const T>(out), head_rows<const T>(dout), den,
          dden, items, n, d, e);
    if (items * n * d > 0)
      dq_kernel<T><<<grid_for(items * n * d), kBlock, 0, stream_>>>(
          head_rows<const T>(dout), sums, z, den, dden, head_rows<T>(dq), items, n, d, e);
    if (items * d * e > 0)
      query_sums_kernel<T><<<grid_for(items * d * e), kBlock, 0, stream_>>>(
          head_rows<const T>(q), head_rows<const T>(dout), den, nullptr, ds, items, n, d, e);
    if (items * d > 0)
      query_sums_kernel<T><<<grid_for(items * d), kBlock, 0, stream_>>>(
          head_rows<const T>(q), head_rows<const T>(dout), den, dden, dz, items, n, d, 1);
    if (items * m * (d + e) > 0)
      key_grads_kernel<T><<<grid_for(items * m * (d + e)), kBlock, 0, stream_>>>(
          head_rows<const T>(k), head_rows<const T>(v), ds, dz, head_rows<T>(dk), head_rows<T>(dv),
          items, m, d, e);
  });
  check_launch("linear_attention_backward");
}

}  // namespace mixlab
