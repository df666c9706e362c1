// The selective scan of mamba and its backward on the CPU (backends/kernels.def, "the selective
// scan"; the plain loops it is checked against: backends/reference/selective_scan.h).
//
// Sequential over the tokens, parallel over (item, group of channels): a task owns up to
// kScanGroup channels of one item and walks its tokens left to right, keeping each channel's
// state [state] only. The backward recomputes the task's states into a buffer of [tokens + 1,
// group, state] (one item's worth, never [batch, tokens, channels, state]) and walks the tokens
// backwards. Its sums over channels (dB, dC) go into one partial per group and its sums over
// items (dA, dD) into one partial per item, combined in a fixed order afterwards: the groups are
// fixed by the channel count, so the numbers do not depend on the thread count. exp is
// fast_math.h's (plain arithmetic in float32, so the loops over the state vectorise; libm in
// float64).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/simd/fast_math.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

constexpr int64_t kScanGroup = 32;  // channels per task

struct ScanShape {
  int64_t batch, tokens, channels, state, groups;
  explicit ScanShape(const View& u, const View& a)
      : batch(u.shape[0]),
        tokens(u.shape[1]),
        channels(u.shape[2]),
        state(a.shape[1]),
        groups((u.shape[2] + kScanGroup - 1) / kScanGroup) {}
  int64_t first(int64_t group) const { return group * kScanGroup; }
  int64_t width(int64_t group) const { return std::min(kScanGroup, channels - group * kScanGroup); }
};

// One task (item, group) per unit of work: about a scan of 4k multiply-adds per task at least.
int64_t scan_grain(const ScanShape& s) {
  int64_t work = std::max<int64_t>(1, s.tokens * kScanGroup * s.state);
  return std::max<int64_t>(1, 4096 / work);
}

// h ← exp(Δ A) ⊙ h + Δ B u for the channels [c0, c0 + width) of one token's row; writes each
// channel's y (when y is non-null). h is [width, state].
template <typename T>
void scan_row(const T* u, const T* delta, const T* a, const T* b, const T* c, const T* d, T* y,
              T* __restrict h, int64_t c0, int64_t width, int64_t n) {
  for (int64_t j = 0; j < width; ++j) {
    const T dt = delta[c0 + j], x = u[c0 + j];
    const T* __restrict a_row = a + (c0 + j) * n;
    T* __restrict hj = h + j * n;
    T out = 0;
    for (int64_t k = 0; k < n; ++k) {
      hj[k] = cpu::exp_of(dt * a_row[k]) * hj[k] + dt * b[k] * x;
      out += c[k] * hj[k];
    }
    if (y) y[c0 + j] = out + d[c0 + j] * x;
  }
}

}  // namespace

void CpuBackend::selective_scan(const View& u, const View& delta, const View& a, const View& b,
                                const View& c, const View& d, const View& y) {
  dispatch_floating(u.dtype, "selective_scan", [&](auto tag) {
    using T = decltype(tag);
    const ScanShape s(u, a);
    const int64_t E = s.channels, n = s.state;
    parallel_for(s.batch * s.groups, scan_grain(s), [&](int64_t tb, int64_t te) {
      std::vector<T> h(static_cast<size_t>(kScanGroup * n));
      for (int64_t task = tb; task < te; ++task) {
        const int64_t item = task / s.groups, group = task % s.groups;
        std::fill(h.begin(), h.end(), T(0));
        for (int64_t i = 0; i < s.tokens; ++i) {
          const int64_t row = item * s.tokens + i;
          scan_row(u.as<T>() + row * E, delta.as<T>() + row * E, a.as<T>(), b.as<T>() + row * n,
                   c.as<T>() + row * n, d.as<T>(), y.as<T>() + row * E, h.data(), s.first(group),
                   s.width(group), n);
        }
      }
    });
  });
}

void CpuBackend::selective_scan_backward(const View& u, const View& delta, const View& a,
                                         const View& b, const View& c, const View& d,
                                         const View& dy, const View& du, const View& ddelta,
                                         const View& da, const View& db, const View& dc,
                                         const View& dd) {
  dispatch_floating(u.dtype, "selective_scan_backward", [&](auto tag) {
    using T = decltype(tag);
    const ScanShape s(u, a);
    const int64_t E = s.channels, n = s.state, N = s.tokens;
    const T *pu = u.as<T>(), *pdelta = delta.as<T>(), *pa = a.as<T>(), *pb = b.as<T>(),
            *pc = c.as<T>(), *pd = d.as<T>(), *pdy = dy.as<T>();
    // Partials: dB and dC per (item, group) [tokens, state]; dA and dD per item.
    std::vector<T> db_part(static_cast<size_t>(s.batch * s.groups * N * n), T(0));
    std::vector<T> dc_part(db_part.size(), T(0));
    std::vector<T> da_part(static_cast<size_t>(s.batch * E * n), T(0));
    std::vector<T> dd_part(static_cast<size_t>(s.batch * E), T(0));

    parallel_for(s.batch * s.groups, std::max<int64_t>(1, scan_grain(s) / 2),
                 [&](int64_t tb, int64_t te) {
                   std::vector<T> states, carry;
                   for (int64_t task = tb; task < te; ++task) {
                     const int64_t item = task / s.groups, group = task % s.groups;
                     const int64_t c0 = s.first(group), width = s.width(group), stride = width * n;
                     // states[(i + 1) · stride + j · n + k] = h_i[c0 + j, k]; the first block is
                     // h_{−1} = 0.
                     states.assign(static_cast<size_t>((N + 1) * stride), T(0));
                     for (int64_t i = 0; i < N; ++i) {
                       const int64_t row = item * N + i;
                       T* h = states.data() + (i + 1) * stride;
                       std::copy(h - stride, h, h);
                       scan_row<T>(pu + row * E, pdelta + row * E, pa, pb + row * n, pc + row * n,
                                   pd, nullptr, h, c0, width, n);
                     }
                     // carry[j · n + k] = exp(Δ_{i+1} A) dh_{i+1}, 0 past the last token.
                     carry.assign(static_cast<size_t>(stride), T(0));
                     T* db_g = db_part.data() + task * N * n;
                     T* dc_g = dc_part.data() + task * N * n;
                     T* da_i = da_part.data() + item * E * n;
                     T* dd_i = dd_part.data() + item * E;
                     for (int64_t i = N - 1; i >= 0; --i) {
                       const int64_t row = item * N + i;
                       const T* b_i = pb + row * n;
                       const T* c_i = pc + row * n;
                       T* __restrict db_row = db_g + i * n;
                       T* __restrict dc_row = dc_g + i * n;
                       for (int64_t j = 0; j < width; ++j) {
                         const int64_t ch = c0 + j, at = row * E + ch;
                         const T g = pdy[at], dt = pdelta[at], x = pu[at];
                         const T* __restrict a_row = pa + ch * n;
                         const T* __restrict h_prev = states.data() + i * stride + j * n;
                         const T* __restrict h_now = h_prev + stride;
                         T* __restrict cj = carry.data() + j * n;
                         T* __restrict da_row = da_i + ch * n;
                         T du_sum = 0, ddelta_sum = 0;
                         for (int64_t k = 0; k < n; ++k) {
                           const T decay = cpu::exp_of(dt * a_row[k]);
                           const T dh = c_i[k] * g + cj[k];
                           du_sum += dh * dt * b_i[k];
                           ddelta_sum += dh * (a_row[k] * decay * h_prev[k] + b_i[k] * x);
                           da_row[k] += dh * dt * decay * h_prev[k];
                           db_row[k] += dh * dt * x;
                           dc_row[k] += g * h_now[k];
                           cj[k] = decay * dh;
                         }
                         du.as<T>()[at] = du_sum + pd[ch] * g;
                         ddelta.as<T>()[at] = ddelta_sum;
                         dd_i[ch] += g * x;
                       }
                     }
                   }
                 });

    // Combine in a fixed order: dB, dC over the groups; dA, dD over the items.
    parallel_for(s.batch * N, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.groups * n)),
                 [&](int64_t rb, int64_t re) {
                   for (int64_t r = rb; r < re; ++r) {
                     const int64_t item = r / N, i = r % N;
                     for (int64_t k = 0; k < n; ++k) {
                       T sb = 0, sc = 0;
                       for (int64_t g = 0; g < s.groups; ++g) {
                         const int64_t at = ((item * s.groups + g) * N + i) * n + k;
                         sb += db_part[at];
                         sc += dc_part[at];
                       }
                       db.as<T>()[r * n + k] = sb;
                       dc.as<T>()[r * n + k] = sc;
                     }
                   }
                 });
    for (int64_t e = 0; e < E * n; ++e) {
      T total = 0;
      for (int64_t item = 0; item < s.batch; ++item) total += da_part[item * E * n + e];
      da.as<T>()[e] = total;
    }
    for (int64_t ch = 0; ch < E; ++ch) {
      T total = 0;
      for (int64_t item = 0; item < s.batch; ++item) total += dd_part[item * E + ch];
      dd.as<T>()[ch] = total;
    }
  });
}

}  // namespace mixlab
