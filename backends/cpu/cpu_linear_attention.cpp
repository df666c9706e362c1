// Linear attention's core without a causal mask, one (b, h) item at a time (backends/kernels.def):
//
//   S = φ(K)ᵀ V [D, E],  z = Σ_j φ(K)_j [D],  out_i = (φ(Q)_i S) / (φ(Q)_i · z + ε)
//
// Why: unfused, the head's three products ran as 512 batched calls each way (77-101 GFLOP/s),
// the denominator as two more of width 1 (6-9 GFLOP/s), and the division and its gradient as
// six broadcast passes over [B, h, N, E]: 16% of the classifier's kernel time. Here an item's S
// and z live in L1 while its rows stream through once.
//
// Every product is a weighted sum of rows (S's row c = Σ_j φ(K)_jc V_j, ...), float32 in AVX-512
// or AVX2 registers a block of output rows at once (register_sums.h, as the attention core's),
// other dtypes as plain loops over contiguous rows; the two sums that would run across a row
// instead (dq's Σ_e dnum_e S_ce, dk's Σ_e V_je dS_ce) read S and dS transposed. Each item runs
// whole on one thread, its sums in a fixed order: results repeat for a given thread count. Nothing
// is saved between forward and backward: S and z are formed again (one item's M·D·E multiply-adds,
// a fifth of the backward's).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/cpu/attention_item.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/simd/register_sums.h"
#include "backends/kernel_products.h"
#include "core/dtype_dispatch.h"
#include "core/parallel.h"

namespace mixlab {
namespace {

using cpu::Mat;
using cpu::mat;

// y[:n] += alpha · x[:n]
template <typename T>
inline void add_scaled(T* __restrict y, T alpha, const T* __restrict x, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] += alpha * x[c];
}

template <typename T>
inline T dot(const T* a, const T* b, int64_t n) {
  T sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// S [d, e] = kᵀ v and z [d] = Σ_j k_j over the item's m keys.
template <typename T>
void key_sums(Mat<const T> k, Mat<const T> v, int64_t m, int64_t d, int64_t e, T* s, T* z) {
  std::fill(s, s + d * e, T(0));
  std::fill(z, z + d, T(0));
  for (int64_t j = 0; j < m; ++j) {
    const T* kj = k.data + j * k.ld;
    add_scaled(z, T(1), kj, d);
    for (int64_t c = 0; c < d; ++c) add_scaled(s + c * e, kj[c], v.data + j * v.ld, e);
  }
}

// t [cols, rows] = x [rows, cols]ᵀ.
template <typename T>
void transpose_into(const T* x, int64_t rows, int64_t cols, T* t) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
}

struct Sizes {
  int64_t items, heads, n, m, d, e;
};
Sizes sizes_of(const View& q, const View& k, const View& v) {
  return {q.shape[0] * q.shape[1], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
}

// The float32 item in registers (simd/register_sums.h): every product a weighted sum of rows, 8
// output rows at once. s: S [d, e]; zs: z [d]; out overwritten.
void item_forward(Mat<const float> q, Mat<const float> k, Mat<const float> v, int64_t n, int64_t m,
                  int64_t d, int64_t e, float eps, Mat<float> out, float* s, float* zs) {
  cpu::weighted_sum_rows(k.data, 1, k.ld, m, v, e, s, e, d);  // S row c = Σ_j k_jc v_j
  std::fill(zs, zs + d, 0.0f);
  for (int64_t j = 0; j < m; ++j) add_scaled(zs, 1.0f, k.data + j * k.ld, d);
  cpu::weighted_sum_rows(q.data, q.ld, 1, d, {s, e}, e, out.data, out.ld, n);  // q S
  for (int64_t i = 0; i < n; ++i) {
    const float den = dot(q.data + i * q.ld, zs, d) + eps;
    float* oi = out.data + i * out.ld;
    for (int64_t c = 0; c < e; ++c) oi[c] /= den;
  }
}

// Scratch: s, st [d·e]; zs, dz [d]; dnum [n·e]; dden [n]. dq, dk, dv overwritten.
void item_backward(Mat<const float> q, Mat<const float> k, Mat<const float> v, Mat<const float> out,
                   Mat<const float> dout, int64_t n, int64_t m, int64_t d, int64_t e, float eps,
                   Mat<float> dq, Mat<float> dk, Mat<float> dv, float* s, float* st, float* zs,
                   float* dz, float* dnum, float* dden) {
  cpu::weighted_sum_rows(k.data, 1, k.ld, m, v, e, s, e, d);
  std::fill(zs, zs + d, 0.0f);
  for (int64_t j = 0; j < m; ++j) add_scaled(zs, 1.0f, k.data + j * k.ld, d);
  transpose_into(s, d, e, st);
  std::fill(dz, dz + d, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float* qi = q.data + i * q.ld;
    const float* gi = dout.data + i * dout.ld;
    const float den = dot(qi, zs, d) + eps;
    dden[i] = -dot(gi, out.data + i * out.ld, e) / den;
    for (int64_t c = 0; c < e; ++c) dnum[i * e + c] = gi[c] / den;
    add_scaled(dz, dden[i], qi, d);
  }
  cpu::weighted_sum_rows(dnum, e, 1, e, {st, d}, d, dq.data, dq.ld, n);  // dnum Sᵀ
  for (int64_t i = 0; i < n; ++i) add_scaled(dq.data + i * dq.ld, dden[i], zs, d);
  cpu::weighted_sum_rows(q.data, 1, q.ld, n, {dnum, e}, e, s, e, d);  // dS = qᵀ dnum (in s)
  transpose_into(s, d, e, st);
  cpu::weighted_sum_rows(v.data, v.ld, 1, e, {st, d}, d, dk.data, dk.ld, m);  // v dSᵀ
  for (int64_t j = 0; j < m; ++j) add_scaled(dk.data + j * dk.ld, 1.0f, dz, d);
  cpu::weighted_sum_rows(k.data, k.ld, 1, d, {s, e}, e, dv.data, dv.ld, m);  // k dS
}

}  // namespace

void CpuBackend::linear_attention(const View& q, const View& k, const View& v, double eps,
                                  const View& out) {
  const Sizes z = sizes_of(q, k, v);
  dispatch_floating(q.dtype, "linear_attention", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(z.items, 1, [&](int64_t begin, int64_t end) {
      kernel_products::ItemsSpan counted;  // MIXLAB_DEBUG: the products' share (kernel_products.h)
      T* s = cpu::thread_scratch<T>(0, static_cast<size_t>(std::max<int64_t>(1, z.d * z.e)));
      T* zs = cpu::thread_scratch<T>(1, static_cast<size_t>(std::max<int64_t>(1, z.d)));
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / z.heads, h = item % z.heads;
        Mat<const T> qm = mat<const T>(q, b, h), km = mat<const T>(k, b, h);
        Mat<const T> vm = mat<const T>(v, b, h);
        Mat<T> om = mat<T>(out, b, h);
        if (item + 1 < end) {  // the next item's operands, while this one computes
          const int64_t nb = (item + 1) / z.heads, nh = (item + 1) % z.heads;
          cpu::prefetch_rows(mat<const T>(q, nb, nh), z.n, z.d);
          cpu::prefetch_rows(mat<const T>(k, nb, nh), z.m, z.d);
          cpu::prefetch_rows(mat<const T>(v, nb, nh), z.m, z.e);
        }
        if constexpr (std::is_same_v<T, float>) {
          item_forward(qm, km, vm, z.n, z.m, z.d, z.e, static_cast<float>(eps), om, s, zs);
          continue;
        }
        key_sums(km, vm, z.m, z.d, z.e, s, zs);
        for (int64_t i = 0; i < z.n; ++i) {
          const T* qi = qm.data + i * qm.ld;
          T* oi = om.data + i * om.ld;
          std::fill(oi, oi + z.e, T(0));
          for (int64_t c = 0; c < z.d; ++c) add_scaled(oi, qi[c], s + c * z.e, z.e);
          const T den = dot(qi, zs, z.d) + static_cast<T>(eps);
          for (int64_t c = 0; c < z.e; ++c) oi[c] /= den;
        }
      }
    });
  });
}

void CpuBackend::linear_attention_backward(const View& q, const View& k, const View& v, double eps,
                                           const View& out, const View& dout, const View& dq,
                                           const View& dk, const View& dv) {
  const Sizes z = sizes_of(q, k, v);
  dispatch_floating(q.dtype, "linear_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    parallel_for(z.items, 1, [&](int64_t begin, int64_t end) {
      kernel_products::ItemsSpan counted;  // MIXLAB_DEBUG: the products' share (kernel_products.h)
      const size_t block = static_cast<size_t>(std::max<int64_t>(1, z.d * z.e));
      T* s = cpu::thread_scratch<T>(0, block);  // S, then dS
      T* zs = cpu::thread_scratch<T>(1, static_cast<size_t>(std::max<int64_t>(1, 2 * z.d + z.e)));
      T* st = cpu::thread_scratch<T>(2, block);  // Sᵀ, then dSᵀ
      T* dz = zs + z.d;
      T* dnum = zs + 2 * z.d;     // one query's (the float32 path keeps every query's, and dden)
      [[maybe_unused]] T* rows =  // the float32 item's dnum and dden, every query's
          cpu::thread_scratch<T>(3, static_cast<size_t>(std::max<int64_t>(1, z.n * (z.e + 1))));
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / z.heads, h = item % z.heads;
        Mat<const T> qm = mat<const T>(q, b, h), km = mat<const T>(k, b, h);
        Mat<const T> vm = mat<const T>(v, b, h), om = mat<const T>(out, b, h);
        Mat<const T> gm = mat<const T>(dout, b, h);
        Mat<T> dqm = mat<T>(dq, b, h), dkm = mat<T>(dk, b, h), dvm = mat<T>(dv, b, h);
        if (item + 1 < end) {  // the next item's operands, while this one computes
          const int64_t nb = (item + 1) / z.heads, nh = (item + 1) % z.heads;
          cpu::prefetch_rows(mat<const T>(q, nb, nh), z.n, z.d);
          cpu::prefetch_rows(mat<const T>(k, nb, nh), z.m, z.d);
          cpu::prefetch_rows(mat<const T>(v, nb, nh), z.m, z.e);
          cpu::prefetch_rows(mat<const T>(out, nb, nh), z.n, z.e);
          cpu::prefetch_rows(mat<const T>(dout, nb, nh), z.n, z.e);
        }
        if constexpr (std::is_same_v<T, float>) {
          item_backward(qm, km, vm, om, gm, z.n, z.m, z.d, z.e, static_cast<float>(eps), dqm, dkm,
                        dvm, s, st, zs, dz, rows, rows + z.n * z.e);
          continue;
        }
        key_sums(km, vm, z.m, z.d, z.e, s, zs);
        transpose_into(s, z.d, z.e, st);
        // Per query: dq_i, and the sums dS (in s, now free) and dz.
        std::fill(s, s + z.d * z.e, T(0));
        std::fill(dz, dz + z.d, T(0));
        for (int64_t i = 0; i < z.n; ++i) {
          const T* qi = qm.data + i * qm.ld;
          const T* gi = gm.data + i * gm.ld;
          T* dqi = dqm.data + i * dqm.ld;
          const T den = dot(qi, zs, z.d) + static_cast<T>(eps);
          const T dden = -dot(gi, om.data + i * om.ld, z.e) / den;
          for (int64_t c = 0; c < z.e; ++c) dnum[c] = gi[c] / den;
          for (int64_t c = 0; c < z.d; ++c) dqi[c] = dden * zs[c];
          for (int64_t c = 0; c < z.e; ++c) add_scaled(dqi, dnum[c], st + c * z.d, z.d);
          for (int64_t c = 0; c < z.d; ++c) add_scaled(s + c * z.e, qi[c], dnum, z.e);
          add_scaled(dz, dden, qi, z.d);
        }
        // Per key: dk_j = v_j dSᵀ + dz, dv_j = k_j dS.
        transpose_into(s, z.d, z.e, st);
        for (int64_t j = 0; j < z.m; ++j) {
          const T* kj = km.data + j * km.ld;
          const T* vj = vm.data + j * vm.ld;
          T* dkj = dkm.data + j * dkm.ld;
          T* dvj = dvm.data + j * dvm.ld;
          std::copy(dz, dz + z.d, dkj);
          for (int64_t c = 0; c < z.e; ++c) add_scaled(dkj, vj[c], st + c * z.d, z.d);
          std::fill(dvj, dvj + z.e, T(0));
          for (int64_t c = 0; c < z.d; ++c) add_scaled(dvj, kj[c], s + c * z.e, z.e);
        }
      }
    });
  });
}

}  // namespace mixlab
