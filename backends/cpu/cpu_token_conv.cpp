// The depthwise token convolution of lightconv and dynconv (backends/kernels.def, "depthwise
// token convolution"): each output row is a weighted sum of K neighbouring rows of g, one weight
// per head and tap, read straight from g (no padded copy, no stacked windows). Work is split over
// rows (b, t); the inner loops run over contiguous channels so they vectorise. Taps shared by
// every row are expanded once per call into one coefficient per (tap, channel), and their
// gradient is summed per channel in per-thread partials over a fixed split of the rows, combined
// in order: reproducible for a given thread count.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/row_grain.h"
#include "backends/cpu/row_partials.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

struct ConvShape {
  int64_t batch, n, d, heads, k, head_dim;
  bool per_item, per_position;  // taps [B, ·] rather than [1, ·]; [·, N] rather than [·, 1]
  ConvShape(const View& g, const View& taps)
      : batch(g.shape[0]),
        n(g.shape[1]),
        d(g.shape[2]),
        heads(taps.shape[2]),
        k(taps.shape[3]),
        head_dim(g.shape[2] / taps.shape[2]),
        per_item(taps.shape[0] > 1),
        per_position(taps.shape[1] > 1) {}
  bool shared() const { return !per_item && !per_position; }
  // Which [H, K] block of taps row (b, t) uses.
  int64_t slot(int64_t b, int64_t t) const {
    return (per_item ? b : 0) * (per_position ? n : 1) + (per_position ? t : 0);
  }
  int64_t slots() const { return (per_item ? batch : 1) * (per_position ? n : 1); }
};

// Rows per task: about 16k multiply-adds, as the other row kernels take.
int64_t rows_per_task(const ConvShape& s) { return cpu::rows_per_task(s.d * s.k); }

// Shared taps [H, K] as one coefficient per (tap, channel): coef[m·d + c] = taps[h(c)·K + m].
template <typename T>
const T* expanded(const T* taps, const ConvShape& s, std::vector<T>& buffer) {
  buffer.resize(static_cast<size_t>(s.k * s.d));
  for (int64_t m = 0; m < s.k; ++m)
    for (int64_t c = 0; c < s.d; ++c) buffer[m * s.d + c] = taps[(c / s.head_dim) * s.k + m];
  return buffer.data();
}

// acc += w · src over one row of d channels: one coefficient per channel (expanded shared taps,
// coef non-null) or per head (w_head[h · stride], per-position taps).
template <typename T>
void accumulate_row(T* __restrict acc, const T* __restrict src, const T* __restrict coef,
                    const T* w_head, int64_t stride, const ConvShape& s) {
  if (coef) {
    for (int64_t c = 0; c < s.d; ++c) acc[c] += coef[c] * src[c];
    return;
  }
  for (int64_t h = 0; h < s.heads; ++h) {
    const T w = w_head[h * stride];
    T* __restrict a = acc + h * s.head_dim;
    const T* __restrict x = src + h * s.head_dim;
    for (int64_t c = 0; c < s.head_dim; ++c) a[c] += w * x[c];
  }
}

// Σ a[c]·b[c] over n channels (the CPU kernels are built with -fassociative-math, so the loop
// vectorises; its order is fixed by the binary: deterministic).
template <typename T>
T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T total = 0;
  for (int64_t c = 0; c < n; ++c) total += a[c] * b[c];
  return total;
}

// The taps m of output row t that read a row of g inside [0, N): t + m − left in [0, N).
struct TapRange {
  int64_t lo, hi;
};
TapRange forward_taps(int64_t t, int64_t left, const ConvShape& s) {
  return {std::max<int64_t>(0, left - t), std::min<int64_t>(s.k, s.n + left - t)};
}
// The taps m through which row s of g reaches an output row t = s − m + left in [0, N).
TapRange backward_taps(int64_t row, int64_t left, const ConvShape& s) {
  return {std::max<int64_t>(0, row + left - s.n + 1), std::min<int64_t>(s.k, row + left + 1)};
}

}  // namespace

void CpuBackend::token_conv(const View& g, const View& taps, int64_t left, const View& out) {
  dispatch_floating(g.dtype, "token_conv", [&](auto tag) {
    using T = decltype(tag);
    const ConvShape s(g, taps);
    thread_local std::vector<T> buffer;
    const T* coef = s.shared() ? expanded(taps.as<T>(), s, buffer) : nullptr;
    parallel_for(s.batch * s.n, rows_per_task(s), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        int64_t b = r / s.n, t = r % s.n;
        T* o = out.as<T>() + r * s.d;
        std::fill(o, o + s.d, T(0));
        const T* w = taps.as<T>() + s.slot(b, t) * s.heads * s.k;
        TapRange range = forward_taps(t, left, s);
        for (int64_t m = range.lo; m < range.hi; ++m) {
          const T* src = g.as<T>() + (r + m - left) * s.d;
          accumulate_row(o, src, coef ? coef + m * s.d : nullptr, w + m, s.k, s);
        }
      }
    });
  });
}

void CpuBackend::token_conv_backward(const View& g, const View& taps, const View& dout,
                                     int64_t left, const View& dg, const View& dtaps) {
  dispatch_floating(g.dtype, "token_conv_backward", [&](auto tag) {
    using T = decltype(tag);
    const ConvShape s(g, taps);
    const T* x = g.as<T>();
    const T* dy = dout.as<T>();
    const int64_t rows = s.batch * s.n, hk = s.heads * s.k;
    thread_local std::vector<T> buffer;
    const T* coef = s.shared() ? expanded(taps.as<T>(), s, buffer) : nullptr;

    // dg: row (b, row) gathers the output rows it fed, each through its own tap.
    parallel_for(rows, rows_per_task(s), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        int64_t b = r / s.n, row = r % s.n;
        T* o = dg.as<T>() + r * s.d;
        std::fill(o, o + s.d, T(0));
        TapRange range = backward_taps(row, left, s);
        for (int64_t m = range.lo; m < range.hi; ++m) {
          int64_t t = row - m + left;
          const T* w = taps.as<T>() + s.slot(b, t) * hk;
          accumulate_row(o, dy + (b * s.n + t) * s.d, coef ? coef + m * s.d : nullptr, w + m, s.k,
                         s);
        }
      }
    });

    if (!s.shared()) {
      // Each block of taps is owned by one task, which sums the rows sharing it in order.
      const int64_t items = s.per_item ? 1 : s.batch, positions = s.per_position ? 1 : s.n;
      parallel_for(s.slots(), std::max<int64_t>(1, rows_per_task(s) / (items * positions)),
                   [&](int64_t sb, int64_t se) {
                     for (int64_t slot = sb; slot < se; ++slot) {
                       T* out = dtaps.as<T>() + slot * hk;
                       std::fill(out, out + hk, T(0));
                       int64_t b0 = s.per_item ? slot / (s.per_position ? s.n : 1) : 0;
                       int64_t t0 = s.per_position ? slot % s.n : 0;
                       for (int64_t b = b0; b < b0 + items; ++b)
                         for (int64_t t = t0; t < t0 + positions; ++t) {
                           const T* grad = dy + (b * s.n + t) * s.d;
                           TapRange range = forward_taps(t, left, s);
                           for (int64_t m = range.lo; m < range.hi; ++m) {
                             const T* src = x + (b * s.n + t + m - left) * s.d;
                             for (int64_t h = 0; h < s.heads; ++h)
                               out[h * s.k + m] +=
                                   dot(grad + h * s.head_dim, src + h * s.head_dim, s.head_dim);
                           }
                         }
                     }
                   });
      return;
    }

    // Shared taps: per-channel sums Σ dout[t, c] · g[t + m − left, c] in one [K, d] partial per
    // chunk of rows, the chunks fixed by the thread count and combined in order.
    const int64_t kd = s.k * s.d;
    auto sums = cpu::accumulate_row_chunks<T>(rows, kd, [&](int64_t rb, int64_t re, T* acc) {
      for (int64_t r = rb; r < re; ++r) {
        int64_t t = r % s.n;
        const T* __restrict grad = dy + r * s.d;
        TapRange range = forward_taps(t, left, s);
        for (int64_t m = range.lo; m < range.hi; ++m) {
          const T* __restrict src = x + (r + m - left) * s.d;
          T* __restrict a = acc + m * s.d;
          for (int64_t c = 0; c < s.d; ++c) a[c] += grad[c] * src[c];
        }
      }
    });
    T* out = dtaps.as<T>();
    for (int64_t m = 0; m < s.k; ++m)
      for (int64_t h = 0; h < s.heads; ++h) {
        T total = 0;
        for (int64_t c = 0; c < s.head_dim; ++c) total += sums.column(m * s.d + h * s.head_dim + c);
        out[h * s.k + m] = total;
      }
  });
}

}  // namespace mixlab
