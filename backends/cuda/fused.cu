// Fused kernels (the "fused" block of backends/kernels.def) on CUDA: bias (+ GELU) in one pass,
// a per-channel scale and shift (ResMLP),
// the residual add + dropout + layer norm as one row kernel, and dropout with its mask generated
// in the kernel. Per-element formulas are the CPU's (backends/fused_ops.h); the dropout draw is
// the same integer function as dropout_mask's, so masks are bit-identical to the CPU's.
#include "backends/cuda/common.cuh"
#include "backends/cuda/cuda_math.cuh"
#include "backends/cuda/sums.cuh"
#include "backends/fused_ops.h"

namespace mixlab {
namespace cuda {
namespace {

template <typename T>
__global__ void bias_act_kernel(const T* x, const T* bias, T* pre, T* y, int64_t n, int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T b = bias[i % cols];
    if (y) {
      T p;
      y[i] = fused::bias_gelu<CudaMath>(x[i], b, p);
      pre[i] = p;
    } else {
      pre[i] = x[i] + b;
    }
  }
}

template <typename T>
__global__ void bias_gelu_dx_kernel(const T* dy, const T* pre, T* dx, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    dx[i] = fused::bias_gelu_grad<CudaMath>(dy[i], pre[i]);
}

// gemm_epilogue's BiasGeluSlope: pre = c + bias, y = gelu(pre), c = gelu'(pre).
template <typename T>
__global__ void bias_gelu_slope_kernel(T* c, const T* bias, T* y, int64_t n, int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T pre;
    y[i] = fused::bias_gelu<CudaMath>(c[i], bias[i % cols], pre);
    c[i] = apply_unary<UnaryOp::GeluErfGrad, CudaMath>(pre, T(0));
  }
}

// gemm_epilogue's Times: c *= factor.
template <typename T>
__global__ void times_kernel(T* c, const T* factor, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    c[i] *= factor[i];
}

template <typename T>
__global__ void scale_shift_kernel(const T* x, const T* scale, const T* shift, T* y, int64_t n,
                                   int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t c = i % cols;
    y[i] = shift ? x[i] * scale[c] + shift[c] : x[i] * scale[c];
  }
}

// dx = dy * scale[c], element-wise.
template <typename T>
__global__ void scale_dx_kernel(const T* dy, const T* scale, T* dx, int64_t n, int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    dx[i] = dy[i] * scale[i % cols];
}

template <typename G, typename T>
__global__ void add_dropout_layer_norm_kernel(const T* x, const T* h, const T* gamma, const T* beta,
                                              T* sum, T* y, T* mean, T* rstd, int64_t rows,
                                              int64_t cols, double p, uint64_t mixed_seed,
                                              uint64_t threshold, T keep, T eps) {
  int64_t row = G::row();
  if (row >= rows) return;
  const T* px = x + row * cols;
  const T* ph = h + row * cols;
  T* ps = sum + row * cols;
  uint64_t base = static_cast<uint64_t>(row * cols);
  for (int64_t i = G::rank(); i < cols; i += G::size())
    ps[i] = p > 0 ? px[i] + ph[i] * fused::dropout_factor<T>(mixed_seed, base + i, threshold, keep)
                  : px[i] + ph[i];
  if (!y) return;
  // Each lane reads back only the elements it wrote: no synchronisation needed before the sums.
  T m = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) m += ps[i];
  m = G::reduce(m, SumOp{}, T(0)) / T(cols);
  T var = 0;
  for (int64_t i = G::rank(); i < cols; i += G::size()) var += (ps[i] - m) * (ps[i] - m);
  var = G::reduce(var, SumOp{}, T(0)) / T(cols);
  T rs = T(1) / d_sqrt(var + eps);
  if (G::rank() == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
  T* out = y + row * cols;
  for (int64_t i = G::rank(); i < cols; i += G::size()) {
    T v = (ps[i] - m) * rs;
    if (gamma) v *= gamma[i];
    if (beta) v += beta[i];
    out[i] = v;
  }
}

template <typename T>
__global__ void dropout_apply_kernel(const T* x, T* y, int64_t n, uint64_t threshold,
                                     uint64_t mixed_seed, T keep) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    y[i] = x[i] * fused::dropout_factor<T>(mixed_seed, static_cast<uint64_t>(i), threshold, keep);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::bias_act(const View& x, const View& bias, const View& pre, const View& y,
                           int64_t rows, int64_t cols) {
  int64_t n = rows * cols;
  if (n == 0) return;
  activate();
  dispatch_floating(x.dtype, "bias_act", [&](auto tag) {
    using T = decltype(tag);
    bias_act_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(x.as<T>(), bias.as<T>(), pre.as<T>(),
                                                            y.as<T>(), n, cols);
  });
  check_launch("bias_act");
}

void CudaBackend::bias_gelu_backward(const View& dy, const View& pre, const View& dx,
                                     const View& dbias, int64_t rows, int64_t cols) {
  if (cols == 0) return;
  activate();
  dispatch_floating(dy.dtype, "bias_gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    int64_t n = rows * cols;
    if (n > 0)
      bias_gelu_dx_kernel<T>
          <<<grid_for(n), kBlock, 0, stream_>>>(dy.as<T>(), pre.as<T>(), dx.as<T>(), n);
    column_sums<T>(*this, dx.as<T>(), nullptr, cols, rows, cols, dbias.as<T>());
  });
  check_launch("bias_gelu_backward");
}

// cuBLAS's product, then the epilogue as one elementwise pass over C (cuBLASLt's GELU epilogues
// use the tanh form, not gelu_erf, so they would not match the CPU's numbers).
void CudaBackend::gemm_epilogue(const GemmArgs& g, GemmEpilogue epilogue, const View& bias,
                                const View& aux) {
  check(g.batch == 1 && (g.m <= 1 || g.ldc == g.n), "gemm_epilogue: C must be one contiguous [",
        g.m, ", ", g.n, "] matrix (batch ", g.batch, ", ldc ", g.ldc, ")");
  gemm(g);
  if (epilogue == GemmEpilogue::RowSums) {  // C stays as cuBLAS made it
    if (g.m == 0) return;
    activate();
    dispatch_floating(g.dtype, "gemm_epilogue", [&](auto tag) {
      using T = decltype(tag);
      const T* a = static_cast<const T*>(g.a);
      if (g.trans_a)  // A stored [k, m]: op(A)'s rows are its columns
        column_sums<T>(*this, a, nullptr, g.lda, g.k, g.m, aux.as<T>());
      else
        row_sums<T>(*this, a, g.lda, g.m, g.k, aux.as<T>());
    });
    check_launch("gemm_epilogue");
    return;
  }
  int64_t n = g.m * g.n;
  if (n == 0) return;
  activate();
  dispatch_floating(g.dtype, "gemm_epilogue", [&](auto tag) {
    using T = decltype(tag);
    T* c = static_cast<T*>(g.c);
    if (epilogue == GemmEpilogue::Times)
      times_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(c, aux.as<T>(), n);
    else if (epilogue == GemmEpilogue::BiasGeluSlope)
      bias_gelu_slope_kernel<T>
          <<<grid_for(n), kBlock, 0, stream_>>>(c, bias.as<T>(), aux.as<T>(), n, g.n);
    else
      bias_act_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(
          c, bias.as<T>(), c, epilogue == GemmEpilogue::BiasGelu ? aux.as<T>() : nullptr, n, g.n);
  });
  check_launch("gemm_epilogue");
}

void CudaBackend::scale_shift(const View& x, const View& scale, const View& shift, const View& y,
                              int64_t rows, int64_t cols) {
  int64_t n = rows * cols;
  if (n == 0) return;
  activate();
  dispatch_floating(x.dtype, "scale_shift", [&](auto tag) {
    using T = decltype(tag);
    scale_shift_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(x.as<T>(), scale.as<T>(),
                                                               shift.as<T>(), y.as<T>(), n, cols);
  });
  check_launch("scale_shift");
}

void CudaBackend::scale_shift_backward(const View& dy, const View& x, const View& scale,
                                       const View& dx, const View& dscale, const View& dshift,
                                       int64_t rows, int64_t cols) {
  if (cols == 0) return;
  activate();
  dispatch_floating(dy.dtype, "scale_shift_backward", [&](auto tag) {
    using T = decltype(tag);
    int64_t n = rows * cols;
    if (n > 0)
      scale_dx_kernel<T>
          <<<grid_for(n), kBlock, 0, stream_>>>(dy.as<T>(), scale.as<T>(), dx.as<T>(), n, cols);
    column_sums<T>(*this, dy.as<T>(), x.as<T>(), cols, rows, cols, dscale.as<T>());
    if (dshift.data) column_sums<T>(*this, dy.as<T>(), nullptr, cols, rows, cols, dshift.as<T>());
  });
  check_launch("scale_shift_backward");
}

void CudaBackend::add_dropout_layer_norm(const View& x, const View& h, const View& gamma,
                                         const View& beta, const View& sum, const View& y,
                                         const View& mean, const View& rstd, int64_t rows,
                                         int64_t cols, double p, uint64_t seed, double eps) {
  if (rows == 0 || cols == 0) return;
  activate();
  dispatch_floating(x.dtype, "add_dropout_layer_norm", [&](auto tag) {
    using T = decltype(tag);
    launch_rows(rows, cols, [&](auto group, unsigned int blocks, int threads) {
      using G = decltype(group);
      add_dropout_layer_norm_kernel<G, T><<<blocks, threads, 0, stream_>>>(
          x.as<T>(), h.as<T>(), gamma.as<T>(), beta.as<T>(), sum.as<T>(), y.as<T>(), mean.as<T>(),
          rstd.as<T>(), rows, cols, p, mix64(seed), dropout_threshold(p), fused::dropout_keep<T>(p),
          static_cast<T>(eps));
    });
  });
  check_launch("add_dropout_layer_norm");
}

void CudaBackend::dropout_apply(const View& x, const View& y, double p, uint64_t seed) {
  int64_t n = x.numel();
  if (n == 0) return;
  activate();
  dispatch_floating(x.dtype, "dropout_apply", [&](auto tag) {
    using T = decltype(tag);
    dropout_apply_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(
        x.as<T>(), y.as<T>(), n, dropout_threshold(p), mix64(seed), fused::dropout_keep<T>(p));
  });
  check_launch("dropout_apply");
}

// One thread per (outer, inner) column of the slab, along the normalised axis in order.
template <typename T>
__global__ void sum_normalize_kernel(const T* x, T* y, T* denom, int64_t outer, int64_t length,
                                     int64_t inner, T eps) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner;
       c += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t o = c / inner, i = c % inner, base = o * length * inner + i;
    T total = 0;
    for (int64_t l = 0; l < length; ++l) total += x[base + l * inner];
    total += eps;
    denom[c] = total;
    for (int64_t l = 0; l < length; ++l) y[base + l * inner] = x[base + l * inner] / total;
  }
}

template <typename T>
__global__ void sum_normalize_backward_kernel(const T* dy, const T* y, const T* denom, T* dx,
                                              int64_t outer, int64_t length, int64_t inner) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner;
       c += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t o = c / inner, i = c % inner, base = o * length * inner + i;
    T dot = 0;
    for (int64_t l = 0; l < length; ++l) dot += dy[base + l * inner] * y[base + l * inner];
    for (int64_t l = 0; l < length; ++l)
      dx[base + l * inner] = (dy[base + l * inner] - dot) / denom[c];
  }
}

void CudaBackend::sum_normalize(const View& x, const View& y, const View& denom, int64_t outer,
                                int64_t length, int64_t inner, double eps) {
  if (outer * inner == 0) return;
  activate();
  dispatch_floating(x.dtype, "sum_normalize", [&](auto tag) {
    using T = decltype(tag);
    sum_normalize_kernel<T><<<grid_for(outer * inner), kBlock, 0, stream_>>>(
        x.as<T>(), y.as<T>(), denom.as<T>(), outer, length, inner, static_cast<T>(eps));
  });
  check_launch("sum_normalize");
}

void CudaBackend::sum_normalize_backward(const View& dy, const View& y, const View& denom,
                                         const View& dx, int64_t outer, int64_t length,
                                         int64_t inner) {
  if (outer * inner == 0) return;
  activate();
  dispatch_floating(dy.dtype, "sum_normalize_backward", [&](auto tag) {
    using T = decltype(tag);
    sum_normalize_backward_kernel<T><<<grid_for(outer * inner), kBlock, 0, stream_>>>(
        dy.as<T>(), y.as<T>(), denom.as<T>(), dx.as<T>(), outer, length, inner);
  });
  check_launch("sum_normalize_backward");
}

// gMLP's spatial gate (kernels.def: spatial_gate): the forward a thread per element, the backward
// a warp per row (b, t), whose lanes stride over the channels and whose sum of dg is a warp
// reduction.
namespace cuda {
namespace {

template <typename T>
__global__ void spatial_gate_kernel(const T* g, const T* bias, const T* z, T* y, int64_t n,
                                    int64_t tokens, int64_t channels) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    y[i] = z[i] * (g[i] + bias[(i / channels) % tokens]);
}

template <typename T>
__global__ void spatial_gate_backward_kernel(const T* dy, const T* g, const T* bias, const T* z,
                                             T* dg, T* dz, T* row_sums, int64_t rows,
                                             int64_t tokens, int64_t channels) {
  const int64_t r = WarpPerRow::row();
  if (r >= rows) return;  // a whole warp leaves together
  const T b = bias[r % tokens];
  T total = 0;
  for (int64_t c = WarpPerRow::rank(); c < channels; c += WarpPerRow::size()) {
    const int64_t i = r * channels + c;
    dg[i] = dy[i] * z[i];
    dz[i] = dy[i] * (g[i] + b);
    total += dg[i];
  }
  total = WarpPerRow::reduce(total, SumOp(), T(0));
  if (WarpPerRow::rank() == 0) row_sums[r] = total;
}

}  // namespace
}  // namespace cuda

void CudaBackend::spatial_gate(const View& g, const View& bias, const View& z, const View& y,
                               int64_t batch, int64_t tokens, int64_t channels) {
  const int64_t n = batch * tokens * channels;
  if (n == 0) return;
  activate();
  dispatch_floating(g.dtype, "spatial_gate", [&](auto tag) {
    using T = decltype(tag);
    spatial_gate_kernel<T><<<grid_for(n), kBlock, 0, stream_>>>(g.as<T>(), bias.as<T>(), z.as<T>(),
                                                                y.as<T>(), n, tokens, channels);
  });
  check_launch("spatial_gate");
}

void CudaBackend::spatial_gate_backward(const View& dy, const View& g, const View& bias,
                                        const View& z, const View& dg, const View& dz,
                                        const View& row_sums, int64_t batch, int64_t tokens,
                                        int64_t channels) {
  const int64_t rows = batch * tokens;
  if (rows * channels == 0) return;
  activate();
  dispatch_floating(dy.dtype, "spatial_gate_backward", [&](auto tag) {
    using T = decltype(tag);
    spatial_gate_backward_kernel<T><<<WarpPerRow::blocks(rows, kBlock), kBlock, 0, stream_>>>(
        dy.as<T>(), g.as<T>(), bias.as<T>(), z.as<T>(), dg.as<T>(), dz.as<T>(), row_sums.as<T>(),
        rows, tokens, channels);
  });
  check_launch("spatial_gate_backward");
}

// External attention's memory weights (kernels.def: token_softmax_normalize): one thread block
// per example's [tokens, groups · slots] block (grid_for(batch, 1): a block per example,
// grid-stride beyond the cap). The softmax runs down a column (one thread per head's slot: the
// columns are contiguous, so a warp's reads coalesce), the slot sums along a (token, head)
// segment of a row (one thread per segment); __syncthreads between the phases makes the first
// phase's writes to global memory visible to the block's other threads. P is built in W's
// memory, and the backward takes it as W · D, as the CPU's kernel does.
namespace cuda {
namespace {

constexpr int kItemBlock = 128;

template <typename T>
__global__ void token_softmax_normalize_kernel(const T* logits, const T* valid, T* weights,
                                               T* denom, int64_t batch, int64_t tokens,
                                               int64_t groups, int64_t slots, T eps) {
  const int64_t cols = groups * slots, block = tokens * cols;
  for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
    const T* mask = valid ? valid + b * tokens : nullptr;
    const T* l = logits + b * block;
    T* w = weights + b * block;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {  // P down a column, into W
      T hi = 0;                                                 // set by the first valid token
      bool any = false;
      for (int64_t n = 0; n < tokens; ++n)
        if (!mask || mask[n] != T(0)) {
          const T x = l[n * cols + c];
          hi = any ? (x > hi ? x : hi) : x;
          any = true;
        }
      T total = 0;
      for (int64_t n = 0; n < tokens; ++n) {
        const T e = any && (!mask || mask[n] != T(0)) ? CudaMath::exp(l[n * cols + c] - hi) : T(0);
        w[n * cols + c] = e;
        total += e;
      }
      const T inv = total > T(0) ? T(1) / total : T(0);
      for (int64_t n = 0; n < tokens; ++n) w[n * cols + c] *= inv;
    }
    __syncthreads();
    for (int64_t r = threadIdx.x; r < tokens * groups; r += blockDim.x) {  // D and W per segment
      T* p = w + r * slots;  // row r / groups, head r % groups
      T total = 0;
      for (int64_t s = 0; s < slots; ++s) total += p[s];
      total += eps;
      denom[b * tokens * groups + r] = total;
      for (int64_t s = 0; s < slots; ++s) p[s] /= total;
    }
    __syncthreads();  // the next example's first phase must not overtake this one's readers
  }
}

template <typename T>
__global__ void token_softmax_normalize_backward_kernel(const T* dweights, const T* weights,
                                                        const T* denom, T* dlogits, T* slot_sums,
                                                        int64_t batch, int64_t tokens,
                                                        int64_t groups, int64_t slots) {
  const int64_t cols = groups * slots, block = tokens * cols;
  for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
    const T* dw = dweights + b * block;
    const T* w = weights + b * block;
    const T* d = denom + b * tokens * groups;
    T* dl = dlogits + b * block;
    for (int64_t r = threadIdx.x; r < tokens * groups; r += blockDim.x) {  // dP per segment
      const int64_t at = r * slots;
      T dot = 0;
      for (int64_t s = 0; s < slots; ++s) dot += dw[at + s] * w[at + s];
      for (int64_t s = 0; s < slots; ++s) dl[at + s] = (dw[at + s] - dot) / d[r];
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {  // dL down a column
      const int64_t g = c / slots;
      T along = 0;
      for (int64_t n = 0; n < tokens; ++n)
        along += w[n * cols + c] * d[n * groups + g] * dl[n * cols + c];
      T total = 0;
      for (int64_t n = 0; n < tokens; ++n) {
        const int64_t at = n * cols + c;
        total += (dl[at] = w[at] * d[n * groups + g] * (dl[at] - along));
      }
      if (slot_sums) slot_sums[b * cols + c] = total;
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::token_softmax_normalize(const View& logits, const View& valid,
                                          const View& weights, const View& denom, int64_t batch,
                                          int64_t tokens, int64_t groups, int64_t slots,
                                          double eps) {
  if (batch * tokens * groups * slots == 0) return;
  activate();
  dispatch_floating(logits.dtype, "token_softmax_normalize", [&](auto tag) {
    using T = decltype(tag);
    token_softmax_normalize_kernel<T><<<grid_for(batch, 1), kItemBlock, 0, stream_>>>(
        logits.as<T>(), valid.data ? valid.as<T>() : nullptr, weights.as<T>(), denom.as<T>(), batch,
        tokens, groups, slots, static_cast<T>(eps));
  });
  check_launch("token_softmax_normalize");
}

void CudaBackend::token_softmax_normalize_backward(const View& dweights, const View& weights,
                                                   const View& denom, const View& dlogits,
                                                   const View& slot_sums, int64_t batch,
                                                   int64_t tokens, int64_t groups, int64_t slots) {
  if (batch * tokens * groups * slots == 0) return;
  activate();
  dispatch_floating(dweights.dtype, "token_softmax_normalize_backward", [&](auto tag) {
    using T = decltype(tag);
    token_softmax_normalize_backward_kernel<T><<<grid_for(batch, 1), kItemBlock, 0, stream_>>>(
        dweights.as<T>(), weights.as<T>(), denom.as<T>(), dlogits.as<T>(),
        slot_sums.data ? slot_sums.as<T>() : nullptr, batch, tokens, groups, slots);
  });
  check_launch("token_softmax_normalize_backward");
}

template <typename T>
__global__ void glu_kernel(const T* x, T* y, int64_t rows, int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = i / cols, c = i % cols;
    y[i] = fused::glu<CudaMath>(x[r * 2 * cols + c], x[r * 2 * cols + cols + c]);
  }
}

template <typename T>
__global__ void glu_backward_kernel(const T* dy, const T* x, T* dx, int64_t rows, int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = i / cols, c = i % cols, a = r * 2 * cols + c;
    fused::glu_grad<CudaMath>(dy[i], x[a], x[a + cols], dx[a], dx[a + cols]);
  }
}

void CudaBackend::glu(const View& x, const View& y, int64_t rows, int64_t cols) {
  if (rows * cols == 0) return;
  activate();
  dispatch_floating(x.dtype, "glu", [&](auto tag) {
    using T = decltype(tag);
    glu_kernel<T><<<grid_for(rows * cols), kBlock, 0, stream_>>>(x.as<T>(), y.as<T>(), rows, cols);
  });
  check_launch("glu");
}

void CudaBackend::glu_backward(const View& dy, const View& x, const View& dx, int64_t rows,
                               int64_t cols) {
  if (rows * cols == 0) return;
  activate();
  dispatch_floating(x.dtype, "glu_backward", [&](auto tag) {
    using T = decltype(tag);
    glu_backward_kernel<T><<<grid_for(rows * cols), kBlock, 0, stream_>>>(dy.as<T>(), x.as<T>(),
                                                                          dx.as<T>(), rows, cols);
  });
  check_launch("glu_backward");
}

namespace cuda {
namespace {

// A thread per output element (forward) and per row (backward: both gradients from one read of
// the row, summed in a fixed order, no atomics).
template <typename T>
__global__ void outer_product_kernel(const T* a, const T* b, T* out, int64_t rows, int64_t p,
                                     int64_t q) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * p * q;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = i / (p * q), u = (i / q) % p, v = i % q;
    out[i] = a[r * p + u] * b[r * q + v];
  }
}

template <typename T>
__global__ void outer_product_backward_kernel(const T* a, const T* b, const T* dout, T* da, T* db,
                                              int64_t rows, int64_t p, int64_t q) {
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* g = dout + r * p * q;
    for (int64_t v = 0; v < q; ++v) db[r * q + v] = 0;
    for (int64_t u = 0; u < p; ++u) {
      T sum = 0;
      for (int64_t v = 0; v < q; ++v) {
        sum += g[u * q + v] * b[r * q + v];
        db[r * q + v] += g[u * q + v] * a[r * p + u];
      }
      da[r * p + u] = sum;
    }
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::outer_product(const View& a, const View& b, const View& out, int64_t rows,
                                int64_t p, int64_t q) {
  if (rows * p * q == 0) return;
  activate();
  dispatch_floating(a.dtype, "outer_product", [&](auto tag) {
    using T = decltype(tag);
    cuda::outer_product_kernel<T><<<grid_for(rows * p * q), kBlock, 0, stream_>>>(
        a.as<T>(), b.as<T>(), out.as<T>(), rows, p, q);
  });
  check_launch("outer_product");
}

void CudaBackend::outer_product_backward(const View& a, const View& b, const View& dout,
                                         const View& da, const View& db, int64_t rows, int64_t p,
                                         int64_t q) {
  if (rows == 0) return;
  activate();
  dispatch_floating(a.dtype, "outer_product_backward", [&](auto tag) {
    using T = decltype(tag);
    cuda::outer_product_backward_kernel<T><<<grid_for(rows), kBlock, 0, stream_>>>(
        a.as<T>(), b.as<T>(), dout.as<T>(), da.as<T>(), db.as<T>(), rows, p, q);
  });
  check_launch("outer_product_backward");
}

}  // namespace mixlab
