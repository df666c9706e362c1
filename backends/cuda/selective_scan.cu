// The selective scan of mamba and its backward on CUDA (backends/kernels.def, "the selective
// scan"). Reference: backends/cpu/cpu_selective_scan.cpp and the plain loops of
// backends/reference/selective_scan.h.
//
// Straightforward, correct before fast: one thread per (item, channel), walking the tokens in
// order with its state h [state] in scratch memory laid out [state, items · channels] (adjacent
// channels at adjacent addresses). The backward cannot keep every token's state, so it keeps
// them at checkpoints: the forward walk stores the state at the start of each chunk of
// T = ⌈√N⌉ tokens, and the reverse walk recomputes one chunk's T states at a time from its
// checkpoint, about 2√N states per thread in all ([batch, tokens, channels, state] is never
// formed). A warp holds 32 channels of one item, so the sums over channels (dB, dC) are warp
// reductions per token into one partial per warp; the sums over items (dA, dD) are partials per
// item. A last kernel adds the partials in a fixed order: results repeat run to run.
#include "backends/cuda/common.cuh"

namespace mixlab {
namespace cuda {
namespace {

struct ScanDims {
  int64_t batch, tokens, channels, state;
  __host__ __device__ int64_t lanes() const { return batch * channels; }  // threads of the forward
  __host__ __device__ int64_t groups() const { return (channels + 31) / 32; }  // warps per item
};

ScanDims scan_dims(const View& u, const View& a) {
  return {u.shape[0], u.shape[1], u.shape[2], a.shape[1]};
}

// One token of one (item, channel): h ← exp(Δ A) ⊙ h + Δ B u, h read and written at
// h[k · stride]; returns Σ_k C[k] h[k] (when c is non-null).
template <typename T>
__device__ __forceinline__ T scan_token(T* h, int64_t stride, const T* a_row, const T* b_row,
                                        const T* c_row, T dt, T x, int64_t n) {
  T out = 0;
  for (int64_t k = 0; k < n; ++k) {
    const T hk = d_exp(dt * a_row[k]) * h[k * stride] + dt * b_row[k] * x;
    h[k * stride] = hk;
    if (c_row) out += c_row[k] * hk;
  }
  return out;
}

template <typename T>
__global__ void selective_scan_kernel(const T* u, const T* delta, const T* a, const T* b,
                                      const T* c, const T* d, T* y, T* h, ScanDims s) {
  const int64_t total = s.lanes();
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = idx % s.channels, item = idx / s.channels;
    for (int64_t k = 0; k < s.state; ++k) h[k * total + idx] = 0;
    for (int64_t i = 0; i < s.tokens; ++i) {
      const int64_t row = item * s.tokens + i, at = row * s.channels + ch;
      const T out = scan_token(h + idx, total, a + ch * s.state, b + row * s.state,
                               c + row * s.state, delta[at], u[at], s.state);
      y[at] = out + d[ch] * u[at];
    }
  }
}

// The reverse scan. Each warp owns (item, group of 32 channels); lanes past the last channel run
// the same loops with zero contributions so that every lane takes part in the reductions.
// Scratch, each [.., state, items · channels]: ckpt [chunks] (the state before each chunk), hist
// [chunk] (h_i of the chunk being walked back), carry (exp(Δ_{i+1} A) dh_{i+1}). Partials:
// db_part, dc_part [batch, groups, tokens, state], da_part [batch, channels, state], dd_part
// [batch, channels].
template <typename T>
__global__ void selective_scan_backward_kernel(const T* u, const T* delta, const T* a, const T* b,
                                               const T* c, const T* d, const T* dy, T* du,
                                               T* ddelta, T* ckpt, T* hist, T* carry, T* db_part,
                                               T* dc_part, T* da_part, T* dd_part, ScanDims s,
                                               int64_t chunk) {
  const int64_t warp = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  const int64_t groups = s.groups();
  if (warp >= s.batch * groups) return;  // the whole warp leaves together
  const int lane = threadIdx.x & 31;
  const int64_t item = warp / groups, group = warp % groups, ch = group * 32 + lane;
  const bool active = ch < s.channels;
  const int64_t total = s.lanes(), idx = item * s.channels + ch, n = s.state, N = s.tokens;
  const int64_t chunks = (N + chunk - 1) / chunk;
  const T* a_row = a + (active ? ch : 0) * n;

  // Forward: the state at the start of every chunk (carry serves as the running state).
  if (active) {
    for (int64_t k = 0; k < n; ++k) carry[k * total + idx] = 0;
    for (int64_t i = 0; i < N; ++i) {
      if (i % chunk == 0)
        for (int64_t k = 0; k < n; ++k)
          ckpt[((i / chunk) * n + k) * total + idx] = carry[k * total + idx];
      const int64_t row = item * N + i, at = row * s.channels + ch;
      scan_token<T>(carry + idx, total, a_row, b + row * n, nullptr, delta[at], u[at], n);
    }
    for (int64_t k = 0; k < n; ++k) carry[k * total + idx] = 0;
  }

  T dd_sum = 0;
  for (int64_t q = chunks - 1; q >= 0; --q) {
    const int64_t first = q * chunk, last = first + chunk < N ? first + chunk : N;
    if (active) {  // h_i for the chunk's tokens, from its checkpoint
      for (int64_t k = 0; k < n; ++k) hist[k * total + idx] = ckpt[(q * n + k) * total + idx];
      for (int64_t i = first; i < last; ++i) {
        const int64_t row = item * N + i, at = row * s.channels + ch, t = i - first;
        T* h = hist + t * n * total + idx;
        if (t > 0)
          for (int64_t k = 0; k < n; ++k) h[k * total] = h[(k - n) * total];
        scan_token<T>(h, total, a_row, b + row * n, nullptr, delta[at], u[at], n);
      }
    }
    for (int64_t i = last - 1; i >= first; --i) {
      const int64_t row = item * N + i, at = row * s.channels + ch, t = i - first;
      const T g = active ? dy[at] : T(0), dt = active ? delta[at] : T(0), x = active ? u[at] : T(0);
      const T* b_row = b + row * n;
      const T* c_row = c + row * n;
      T du_sum = 0, ddelta_sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        T vb = 0, vc = 0;
        if (active) {
          const T decay = d_exp(dt * a_row[k]);
          const T dh = c_row[k] * g + carry[k * total + idx];
          const T h_prev =
              t > 0 ? hist[((t - 1) * n + k) * total + idx] : ckpt[(q * n + k) * total + idx];
          const T h_now = hist[(t * n + k) * total + idx];
          du_sum += dh * dt * b_row[k];
          ddelta_sum += dh * (a_row[k] * decay * h_prev + b_row[k] * x);
          da_part[idx * n + k] += dh * dt * decay * h_prev;  // this thread's own slot
          vb = dh * dt * x;
          vc = g * h_now;
          carry[k * total + idx] = decay * dh;
        }
        vb = warp_reduce(vb, SumOp{});
        vc = warp_reduce(vc, SumOp{});
        if (lane == 0) {
          db_part[((warp * N) + i) * n + k] = vb;
          dc_part[((warp * N) + i) * n + k] = vc;
        }
      }
      if (active) {
        du[at] = du_sum + d[ch] * g;
        ddelta[at] = ddelta_sum;
        dd_sum += g * x;
      }
    }
  }
  if (active) dd_part[idx] = dd_sum;
}

// db[b, i, k] = Σ_g db_part[b, g, i, k] (and dc), da[c, k] = Σ_b da_part[b, c, k], dd[c] =
// Σ_b dd_part[b, c]: a thread per output element, each summing in order.
template <typename T>
__global__ void selective_scan_sums_kernel(const T* db_part, const T* dc_part, const T* da_part,
                                           const T* dd_part, T* db, T* dc, T* da, T* dd,
                                           ScanDims s) {
  const int64_t groups = s.groups(), n = s.state, N = s.tokens;
  const int64_t rows = s.batch * N * n, params = s.channels * n;
  const int64_t total = rows + params + s.channels;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    if (e < rows) {
      const int64_t k = e % n, i = (e / n) % N, item = e / (n * N);
      T sb = 0, sc = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t at = (((item * groups + g) * N) + i) * n + k;
        sb += db_part[at];
        sc += dc_part[at];
      }
      db[e] = sb;
      dc[e] = sc;
    } else if (e < rows + params) {
      const int64_t p = e - rows;
      T sum = 0;
      for (int64_t item = 0; item < s.batch; ++item) sum += da_part[item * params + p];
      da[p] = sum;
    } else {
      const int64_t ch = e - rows - params;
      T sum = 0;
      for (int64_t item = 0; item < s.batch; ++item) sum += dd_part[item * s.channels + ch];
      dd[ch] = sum;
    }
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::selective_scan(const View& u, const View& delta, const View& a, const View& b,
                                 const View& c, const View& d, const View& y) {
  const ScanDims s = scan_dims(u, a);
  if (s.lanes() * s.tokens == 0) return;
  activate();
  dispatch_floating(u.dtype, "selective_scan", [&](auto tag) {
    using T = decltype(tag);
    Scratch h(*this, static_cast<size_t>(s.lanes() * s.state) * sizeof(T));
    selective_scan_kernel<T><<<grid_for(s.lanes()), kBlock, 0, stream_>>>(
        u.as<const T>(), delta.as<const T>(), a.as<const T>(), b.as<const T>(), c.as<const T>(),
        d.as<const T>(), y.as<T>(), h.as<T>(), s);
  });
  check_launch("selective_scan");
}

void CudaBackend::selective_scan_backward(const View& u, const View& delta, const View& a,
                                          const View& b, const View& c, const View& d,
                                          const View& dy, const View& du, const View& ddelta,
                                          const View& da, const View& db, const View& dc,
                                          const View& dd) {
  const ScanDims s = scan_dims(u, a);
  const int64_t n = s.state, N = s.tokens, total = s.lanes();
  activate();
  dispatch_floating(u.dtype, "selective_scan_backward", [&](auto tag) {
    using T = decltype(tag);
    if (total * N == 0) {  // no token: the sums over tokens are empty
      if (da.numel() > 0)
        MIXLAB_CUDA_CHECK(cudaMemsetAsync(da.data, 0, da.numel() * sizeof(T), stream_));
      if (dd.numel() > 0)
        MIXLAB_CUDA_CHECK(cudaMemsetAsync(dd.data, 0, dd.numel() * sizeof(T), stream_));
      return;
    }
    int64_t chunk = 1;
    while (chunk * chunk < N) ++chunk;  // T = ⌈√N⌉
    const int64_t chunks = (N + chunk - 1) / chunk, warps = s.batch * s.groups();
    const int64_t states = total * n;
    Scratch scratch(*this, static_cast<size_t>(states * (chunks + chunk + 1) + 2 * warps * N * n +
                                               states + total) *
                               sizeof(T));
    T* ckpt = scratch.as<T>();
    T* hist = ckpt + states * chunks;
    T* carry = hist + states * chunk;
    T* db_part = carry + states;
    T* dc_part = db_part + warps * N * n;
    T* da_part = dc_part + warps * N * n;
    T* dd_part = da_part + states;
    if (states > 0) MIXLAB_CUDA_CHECK(cudaMemsetAsync(da_part, 0, states * sizeof(T), stream_));
    constexpr int kWarpsPerBlock = 4;
    const unsigned int blocks =
        static_cast<unsigned int>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
    selective_scan_backward_kernel<T><<<blocks, 32 * kWarpsPerBlock, 0, stream_>>>(
        u.as<const T>(), delta.as<const T>(), a.as<const T>(), b.as<const T>(), c.as<const T>(),
        d.as<const T>(), dy.as<const T>(), du.as<T>(), ddelta.as<T>(), ckpt, hist, carry, db_part,
        dc_part, da_part, dd_part, s, chunk);
    const int64_t outputs = s.batch * N * n + s.channels * n + s.channels;
    selective_scan_sums_kernel<T><<<grid_for(outputs), kBlock, 0, stream_>>>(
        db_part, dc_part, da_part, dd_part, db.as<T>(), dc.as<T>(), da.as<T>(), dd.as<T>(), s);
  });
  check_launch("selective_scan_backward");
}

}  // namespace mixlab
