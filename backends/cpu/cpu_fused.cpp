// Fused kernels (the "fused" block of backends/kernels.def): a bias (and GELU) applied in one
// pass over a product's output, a per-channel scale and shift (ResMLP) in one pass each way, the
// residual add + dropout + layer norm in one row pass, and dropout applied with its mask generated
// on the fly. Rows split over threads; the bias gradient's column sums are per-thread partials over
// a fixed split of rows, combined in order, so results are reproducible for a given thread count.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/cpu/simd/float_rows.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/dropout_runs.h"
#include "backends/cpu/epilogue_row.h"
#include "backends/cpu/layer_norm_row.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/row_partials.h"
#include "backends/fused_ops.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {

void CpuBackend::bias_act(const View& x, const View& bias, const View& pre, const View& y,
                          int64_t rows, int64_t cols) {
  dispatch_floating(x.dtype, "bias_act", [&](auto tag) {
    using T = decltype(tag);
    const T* b = bias.as<T>();
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        T* p = pre.as<T>() + r * cols;  // may be x's row itself
        cpu::bias_row(x.as<T>() + r * cols, b, p, cols);
        if (y.data) cpu::gelu_row(p, y.as<T>() + r * cols, cols);  // the row is still in cache
      }
    });
  });
}

void CpuBackend::bias_gelu_backward(const View& dy, const View& pre, const View& dx,
                                    const View& dbias, int64_t rows, int64_t cols) {
  dispatch_floating(dy.dtype, "bias_gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    // The bias gradient's column sums: per-chunk partials combined in order (row_partials.h).
    auto sums = cpu::accumulate_row_chunks<T>(rows, cols, [&](int64_t rb, int64_t re, T* part) {
      T* __restrict a = part;
      for (int64_t r = rb; r < re; ++r) {
        // Two loops over the row, so that each vectorises (dx and the partial sums may alias
        // as far as the compiler knows in one). `a` is restrict; d is not: the row is written
        // through another pointer (gelu_grad_row's) just before it is read here.
        T* d = dx.as<T>() + r * cols;
        cpu::gelu_grad_row(dy.as<T>() + r * cols, pre.as<T>() + r * cols, d, cols);
        for (int64_t i = 0; i < cols; ++i) a[i] += d[i];
      }
    });
    T* db = dbias.as<T>();
    for (int64_t i = 0; i < cols; ++i) db[i] = sums.column(i);
  });
}

void CpuBackend::scale_shift(const View& x, const View& scale, const View& shift, const View& y,
                             int64_t rows, int64_t cols) {
  dispatch_floating(x.dtype, "scale_shift", [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict s = scale.as<T>();
    const T* __restrict t = shift.as<T>();
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const T* __restrict in = x.as<T>() + r * cols;
        T* __restrict out = y.as<T>() + r * cols;
        if (t)
          for (int64_t i = 0; i < cols; ++i) out[i] = in[i] * s[i] + t[i];
        else
          for (int64_t i = 0; i < cols; ++i) out[i] = in[i] * s[i];
      }
    });
  });
}

void CpuBackend::scale_shift_backward(const View& dy, const View& x, const View& scale,
                                      const View& dx, const View& dscale, const View& dshift,
                                      int64_t rows, int64_t cols) {
  dispatch_floating(dy.dtype, "scale_shift_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict s = scale.as<T>();
    const bool shifted = dshift.data != nullptr;
    // Column sums of dy·x (and of dy): per-chunk partials combined in order (row_partials.h),
    // the two sums side by side in one partial row of 2·cols.
    auto sums = cpu::accumulate_row_chunks<T>(rows, 2 * cols, [&](int64_t rb, int64_t re, T* part) {
      T* __restrict ds = part;
      T* __restrict dt = part + cols;
      for (int64_t r = rb; r < re; ++r) {
        const T* __restrict g = dy.as<T>() + r * cols;
        const T* __restrict in = x.as<T>() + r * cols;
        T* __restrict d = dx.as<T>() + r * cols;
        for (int64_t i = 0; i < cols; ++i) d[i] = g[i] * s[i];
        for (int64_t i = 0; i < cols; ++i) ds[i] += g[i] * in[i];
        if (shifted)
          for (int64_t i = 0; i < cols; ++i) dt[i] += g[i];
      }
    });
    T* out_scale = dscale.as<T>();
    for (int64_t i = 0; i < cols; ++i) out_scale[i] = sums.column(i);
    if (shifted) {
      T* out_shift = dshift.as<T>();
      for (int64_t i = 0; i < cols; ++i) out_shift[i] = sums.column(cols + i);
    }
  });
}

void CpuBackend::add_dropout_layer_norm(const View& x, const View& h, const View& gamma,
                                        const View& beta, const View& sum, const View& y,
                                        const View& mean, const View& rstd, int64_t rows,
                                        int64_t cols, double p, uint64_t seed, double eps) {
  dispatch_floating(x.dtype, "add_dropout_layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const uint64_t mixed = mix64(seed);
    const cpu::RunFactors<T> factors(dropout_threshold(p), fused::dropout_keep<T>(p));
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const T* px = x.as<T>() + r * cols;
        const T* ph = h.as<T>() + r * cols;
        T* ps = sum.as<T>() + r * cols;
        if (p > 0) {
          const auto first = static_cast<uint64_t>(r * cols);
          cpu::for_each_key_run(mixed, first, first + cols,
                                [&](uint32_t key, uint32_t low, uint64_t at, uint64_t count) {
                                  cpu::add_dropout_run(px + at, ph + at, ps + at,
                                                       static_cast<int64_t>(count), key, low,
                                                       factors);
                                });
        } else {
          for (int64_t i = 0; i < cols; ++i) ps[i] = px[i] + ph[i];
        }
        if (y.data)
          cpu::layer_norm_row(ps, gamma.as<T>(), beta.as<T>(), y.as<T>() + r * cols, cols, T(eps),
                              mean.as<T>()[r], rstd.as<T>()[r]);
      }
    });
  });
}

void CpuBackend::dropout_apply(const View& x, const View& y, double p, uint64_t seed) {
  dispatch_floating(x.dtype, "dropout_apply", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    const uint64_t mixed = mix64(seed);
    const cpu::RunFactors<T> factors(dropout_threshold(p), fused::dropout_keep<T>(p));
    parallel_for(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      cpu::for_each_key_run(mixed, static_cast<uint64_t>(b), static_cast<uint64_t>(e),
                            [&](uint32_t key, uint32_t low, uint64_t at, uint64_t count) {
                              cpu::dropout_run(in + b + at, out + b + at,
                                               static_cast<int64_t>(count), key, low, factors);
                            });
    });
  });
}

// Each [length, inner] slab of one `outer` index is small (External attention's 64 slots × the
// tokens) and stays in L1 between the pass that sums it and the pass that divides it. Divided,
// not multiplied by a reciprocal: the unfused div's numbers, and no slower (the passes are bound
// by reading x and writing y).
void CpuBackend::sum_normalize(const View& x, const View& y, const View& denom, int64_t outer,
                               int64_t length, int64_t inner, double eps) {
  dispatch_floating(x.dtype, "sum_normalize", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(outer, std::max<int64_t>(1, cpu::rows_per_task(length * inner)),
                 [&](int64_t ob, int64_t oe) {
                   for (int64_t o = ob; o < oe; ++o) {
                     const T* __restrict in = x.as<T>() + o * length * inner;
                     T* __restrict out = y.as<T>() + o * length * inner;
                     T* __restrict d = denom.as<T>() + o * inner;
                     for (int64_t i = 0; i < inner; ++i) d[i] = T(0);
                     for (int64_t l = 0; l < length; ++l)
                       for (int64_t i = 0; i < inner; ++i) d[i] += in[l * inner + i];
                     for (int64_t i = 0; i < inner; ++i) d[i] += static_cast<T>(eps);
                     for (int64_t l = 0; l < length; ++l)
                       for (int64_t i = 0; i < inner; ++i)
                         out[l * inner + i] = in[l * inner + i] / d[i];
                   }
                 });
  });
}

void CpuBackend::sum_normalize_backward(const View& dy, const View& y, const View& denom,
                                        const View& dx, int64_t outer, int64_t length,
                                        int64_t inner) {
  dispatch_floating(dy.dtype, "sum_normalize_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(outer, std::max<int64_t>(1, cpu::rows_per_task(length * inner)),
                 [&](int64_t ob, int64_t oe) {
                   thread_local std::vector<T> dots;
                   dots.assign(static_cast<size_t>(inner), T(0));
                   T* __restrict dot = dots.data();
                   for (int64_t o = ob; o < oe; ++o) {
                     const T* __restrict g = dy.as<T>() + o * length * inner;
                     const T* __restrict out = y.as<T>() + o * length * inner;
                     const T* __restrict d = denom.as<T>() + o * inner;
                     T* __restrict grad = dx.as<T>() + o * length * inner;
                     for (int64_t i = 0; i < inner; ++i) dot[i] = T(0);
                     for (int64_t l = 0; l < length; ++l)
                       for (int64_t i = 0; i < inner; ++i)
                         dot[i] += g[l * inner + i] * out[l * inner + i];
                     for (int64_t l = 0; l < length; ++l)
                       for (int64_t i = 0; i < inner; ++i)
                         grad[l * inner + i] = (g[l * inner + i] - dot[i]) / d[i];
                   }
                 });
  });
}

void CpuBackend::glu(const View& x, const View& y, int64_t rows, int64_t cols) {
  dispatch_floating(x.dtype, "glu", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(rows, cpu::rows_per_task(2 * cols), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const T* __restrict a = x.as<T>() + r * 2 * cols;
        const T* __restrict b = a + cols;
        T* __restrict out = y.as<T>() + r * cols;
        if constexpr (std::is_same_v<T, float>)  // σ's exp in registers (simd/float_rows.h)
          if (cpu::simd::glu_row(a, b, out, cols)) continue;
        for (int64_t c = 0; c < cols; ++c) out[c] = fused::glu<CpuMath>(a[c], b[c]);
      }
    });
  });
}

void CpuBackend::glu_backward(const View& dy, const View& x, const View& dx, int64_t rows,
                              int64_t cols) {
  dispatch_floating(x.dtype, "glu_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(rows, cpu::rows_per_task(2 * cols), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const T* __restrict g = dy.as<T>() + r * cols;
        const T* __restrict a = x.as<T>() + r * 2 * cols;
        const T* __restrict b = a + cols;
        T* __restrict da = dx.as<T>() + r * 2 * cols;
        T* __restrict db = da + cols;
        if constexpr (std::is_same_v<T, float>)
          if (cpu::simd::glu_grad_row(g, a, b, da, db, cols)) continue;
        for (int64_t c = 0; c < cols; ++c) fused::glu_grad<CpuMath>(g[c], a[c], b[c], da[c], db[c]);
      }
    });
  });
}

// A row's p·q products (7 × 7 for the factorized dense synthesizer) are written as p runs of q
// (float32 rows of q ≤ 16 in one AVX-512 register, avx512_math.h); each thread takes whole rows.
// The backward reads each row of dout once for both gradients, summing in a fixed order (u,
// then v) whatever the thread count.
void CpuBackend::outer_product(const View& a, const View& b, const View& out, int64_t rows,
                               int64_t p, int64_t q) {
  dispatch_floating(a.dtype, "outer_product", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(rows, std::max<int64_t>(1, cpu::rows_per_task(p * q)),
                 [&](int64_t rb, int64_t re) {
                   for (int64_t r = rb; r < re; ++r) {
                     const T* __restrict x = a.as<T>() + r * p;
                     const T* __restrict y = b.as<T>() + r * q;
                     T* __restrict o = out.as<T>() + r * p * q;
                     if constexpr (std::is_same_v<T, float>)
                       if (cpu::simd::outer_row(x, y, o, p, q)) continue;
                     for (int64_t u = 0; u < p; ++u)
                       for (int64_t v = 0; v < q; ++v) o[u * q + v] = x[u] * y[v];
                   }
                 });
  });
}

void CpuBackend::outer_product_backward(const View& a, const View& b, const View& dout,
                                        const View& da, const View& db, int64_t rows, int64_t p,
                                        int64_t q) {
  dispatch_floating(a.dtype, "outer_product_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(rows, std::max<int64_t>(1, cpu::rows_per_task(p * q)),
                 [&](int64_t rb, int64_t re) {
                   for (int64_t r = rb; r < re; ++r) {
                     const T* __restrict x = a.as<T>() + r * p;
                     const T* __restrict y = b.as<T>() + r * q;
                     const T* __restrict g = dout.as<T>() + r * p * q;
                     T* __restrict dx = da.as<T>() + r * p;
                     T* __restrict dy = db.as<T>() + r * q;
                     if constexpr (std::is_same_v<T, float>)
                       if (cpu::simd::outer_grad_row(x, y, g, dx, dy, p, q)) continue;
                     for (int64_t v = 0; v < q; ++v) dy[v] = T(0);
                     for (int64_t u = 0; u < p; ++u) {
                       T sum = 0;
                       for (int64_t v = 0; v < q; ++v) {
                         sum += g[u * q + v] * y[v];
                         dy[v] += g[u * q + v] * x[u];
                       }
                       dx[u] = sum;
                     }
                   }
                 });
  });
}

}  // namespace mixlab
