// Row kernels: softmax, layer norm and cross-entropy, forward and backward side by side. Rows
// are independent, so they split over threads and every row is reduced in a fixed order.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/simd/float_rows.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/simd/fast_math.h"
#include "backends/cpu/layer_norm_row.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/row_max.h"
#include "backends/cpu/row_partials.h"
#include "backends/cpu/strided.h"
#include "core/dtype_dispatch.h"

namespace mixlab {

// ---- softmax ----
void CpuBackend::softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) {
  dispatch_floating(x.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* in = x.as<T>() + r * cols;
        T* out = y.as<T>() + r * cols;
        if constexpr (std::is_same_v<T, float>)  // in vector registers (simd/float_rows.h)
          if (float lse; !log && cpu::simd::softmax_row(in, out, cols, nullptr, lse)) continue;
        T hi = cpu::row_max(in, cols);
        T total = 0;
        for (int64_t i = 0; i < cols; ++i) out[i] = cpu::exp_of(in[i] - hi);
        for (int64_t i = 0; i < cols; ++i) total += out[i];
        if (log) {
          T lse = hi + std::log(total);
          for (int64_t i = 0; i < cols; ++i) out[i] = in[i] - lse;
        } else {
          T inv = T(1) / total;
          for (int64_t i = 0; i < cols; ++i) out[i] *= inv;
        }
      }
    });
  });
}

void CpuBackend::softmax_backward(const View& y, const View& dy, const View& dx, int64_t rows,
                                  int64_t cols, bool log) {
  dispatch_floating(y.dtype, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* py = y.as<T>() + r * cols;
        const T* pg = dy.as<T>() + r * cols;
        T* pd = dx.as<T>() + r * cols;
        T acc = 0;
        if (log) {
          for (int64_t i = 0; i < cols; ++i) acc += pg[i];
          for (int64_t i = 0; i < cols; ++i) pd[i] = pg[i] - cpu::exp_of(py[i]) * acc;
        } else {
          for (int64_t i = 0; i < cols; ++i) acc += pg[i] * py[i];
          for (int64_t i = 0; i < cols; ++i) pd[i] = py[i] * (pg[i] - acc);
        }
      }
    });
  });
}

// ---- layer norm: y = (x - mean) * rstd * gamma + beta, biased variance ----
void CpuBackend::layer_norm(const View& x, const View& gamma, const View& beta, const View& y,
                            const View& mean, const View& rstd, int64_t rows, int64_t cols,
                            double eps) {
  dispatch_floating(x.dtype, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* g = gamma.as<T>();
    const T* bt = beta.as<T>();
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        cpu::layer_norm_row(x.as<T>() + r * cols, g, bt, y.as<T>() + r * cols, cols, T(eps),
                            mean.as<T>()[r], rstd.as<T>()[r]);
    });
  });
}

void CpuBackend::layer_norm_backward(const View& dy, const View& x, const View& mean,
                                     const View& rstd, const View& gamma, const View& dx,
                                     const View& dgamma, const View& dbeta, int64_t rows,
                                     int64_t cols, bool accumulate) {
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    // dgamma/dbeta: per-chunk partial sums combined in order (row_partials.h): chunk row
    // [0, cols) for dgamma, [cols, 2·cols) for dbeta. Two loops over a row, over restrict
    // pointers so that each vectorises: the first takes the row's two sums and adds the row into
    // the partials, the second writes dx: with the partials in loops of their own, four passes
    // over the row took 1.4x as long (rows in cache, 1 thread, AVX2). gamma absent, and the
    // partials not wanted, and dx added to or written, are separate instantiations, not tests
    // per element.
    auto rows_of = [&](auto has_gamma, auto wants_sums, auto adds, int64_t rb, int64_t re,
                       T* part) {
      const T* __restrict gm = gamma.as<T>();
      T* __restrict ag = part;
      T* __restrict ab = part + cols;
      for (int64_t r = rb; r < re; ++r) {
        const T* __restrict px = x.as<T>() + r * cols;
        const T* __restrict pg = dy.as<T>() + r * cols;
        T* __restrict pd = dx.as<T>() + r * cols;
        const T m = mean.as<T>()[r], rs = rstd.as<T>()[r];
        // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * gamma
        T sum_d = 0, sum_dx = 0;
        for (int64_t i = 0; i < cols; ++i) {
          const T xhat = (px[i] - m) * rs;
          const T d = has_gamma ? pg[i] * gm[i] : pg[i];
          sum_d += d;
          sum_dx += d * xhat;
          if constexpr (decltype(wants_sums)::value) {
            ag[i] += pg[i] * xhat;
            ab[i] += pg[i];
          }
        }
        sum_d /= T(cols);
        sum_dx /= T(cols);
        for (int64_t i = 0; i < cols; ++i) {
          const T xhat = (px[i] - m) * rs;
          const T d = has_gamma ? pg[i] * gm[i] : pg[i];
          const T g = rs * (d - sum_d - xhat * sum_dx);
          if constexpr (decltype(adds)::value)
            pd[i] = pd[i] + g;
          else
            pd[i] = g;
        }
      }
    };
    // Calls fn with std::true_type or std::false_type, as `on` says.
    auto with = [](bool on, auto&& fn) {
      if (on)
        fn(std::true_type{});
      else
        fn(std::false_type{});
    };
    const bool wants_sums = dgamma.data || dbeta.data;
    auto sums = cpu::accumulate_row_chunks<T>(rows, 2 * cols, [&](int64_t rb, int64_t re, T* part) {
      with(gamma.data != nullptr, [&](auto has_gamma) {
        with(wants_sums, [&](auto sums_wanted) {
          with(accumulate, [&](auto adds) { rows_of(has_gamma, sums_wanted, adds, rb, re, part); });
        });
      });
    });
    for (int64_t i = 0; i < cols; ++i) {
      if (dgamma.data) dgamma.as<T>()[i] = sums.column(i);
      if (dbeta.data) dbeta.as<T>()[i] = sums.column(cols + i);
    }
  });
}

// ---- cross-entropy with label smoothing: target q = (1-eps) onehot + eps/C ----
void CpuBackend::cross_entropy(const View& logits, const View& targets, const View& loss,
                               const View& lse, int64_t rows, int64_t cols, int64_t ignore_index,
                               double smoothing) {
  dispatch_floating(logits.dtype, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const int32_t* tg = targets.as<int32_t>();
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* z = logits.as<T>() + r * cols;
        T hi = cpu::row_max(z, cols);
        T total = 0, zsum = 0;
        for (int64_t i = 0; i < cols; ++i) total += cpu::exp_of(z[i] - hi);
        for (int64_t i = 0; i < cols; ++i) zsum += z[i];
        T l = hi + std::log(total);
        lse.as<T>()[r] = l;
        int64_t t = tg[r];
        if (t == ignore_index) {
          loss.as<T>()[r] = 0;
          continue;
        }
        // -sum_i q_i (z_i - lse) = (1-eps)(lse - z_t) + eps (lse - mean(z))
        T eps = T(smoothing);
        loss.as<T>()[r] = (T(1) - eps) * (l - z[t]) + eps * (l - zsum / T(cols));
      }
    });
  });
}

void CpuBackend::cross_entropy_backward(const View& logits, const View& targets, const View& lse,
                                        const View& scale, const View& dlogits, int64_t rows,
                                        int64_t cols, int64_t ignore_index, double smoothing) {
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const int32_t* tg = targets.as<int32_t>();
    parallel_for(rows, cpu::rows_per_task(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* z = logits.as<T>() + r * cols;
        T* d = dlogits.as<T>() + r * cols;
        int64_t t = tg[r];
        if (t == ignore_index) {
          for (int64_t i = 0; i < cols; ++i) d[i] = 0;
          continue;
        }
        T s = scale.as<T>()[r], l = lse.as<T>()[r];
        T off = T(smoothing) / T(cols);
        for (int64_t i = 0; i < cols; ++i) d[i] = s * (cpu::exp_of(z[i] - l) - off);
        d[t] -= s * (T(1) - T(smoothing));
      }
    });
  });
}

}  // namespace mixlab
