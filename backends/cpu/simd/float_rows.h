// The float32 rows the CPU kernels run in vector registers, declared in every build so that the
// kernels outside simd/ call them without asking which registers the build has. Each returns
// true when it did the row in this build's registers (AVX-512 or AVX2: vector_math.h), false in
// a build without registers for it; the caller's portable loop, the formula written plainly,
// then runs. What each saves: the row's exp, erf or sigmoid takes a register of lanes per
// instruction where the portable loop's scalar calls take one element (GELU and its gradient
// run 4x as fast with AVX-512; avx2_math.h and avx512_math.h hold the measurements).
#pragma once
#include <cstdint>

#include "backends/cpu/simd/simd_lanes.h"
#include "backends/cpu/simd/vector_math.h"

namespace mixlab::cpu::simd {

// Whether this build has vector registers for the rows below (AVX2 with FMA, or AVX-512).
#if defined(MIXLAB_HAS_LANES)
inline constexpr bool kFloatRows = true;
#else
inline constexpr bool kFloatRows = false;
#endif

// The softmax of a row x of m scores into s (which may be x) over the keys `allowed` marks (m
// floats, nonzero = allowed; null: all); lse = the row's log-sum-exp (-inf: none allowed).
inline bool softmax_row(const float* x, float* s, int64_t m, const float* allowed, float& lse) {
#if defined(MIXLAB_HAS_LANES)
  lse = vector_math::softmax_row(x, s, m, allowed);
  return true;
#else
  (void)x, (void)s, (void)m, (void)allowed, (void)lse;
  return false;
#endif
}

// s = exp(s − shift) over the allowed keys, 0 elsewhere.
inline bool exp_shifted_row(float* s, int64_t m, float shift, const float* allowed) {
#if defined(MIXLAB_HAS_LANES)
  vector_math::exp_shifted_row(s, m, shift, allowed);
  return true;
#else
  (void)s, (void)m, (void)shift, (void)allowed;
  return false;
#endif
}

// y = gelu_erf(pre) over cols floats.
inline bool gelu_row(const float* pre, float* y, int64_t cols) {
#if defined(MIXLAB_HAS_LANES)
  vector_math::gelu_row(pre, y, cols);
  return true;
#else
  (void)pre, (void)y, (void)cols;
  return false;
#endif
}

// dx = dy · gelu_erf'(pre).
inline bool gelu_grad_row(const float* dy, const float* pre, float* dx, int64_t cols) {
#if defined(MIXLAB_HAS_LANES)
  vector_math::gelu_grad_row(dy, pre, dx, cols);
  return true;
#else
  (void)dy, (void)pre, (void)dx, (void)cols;
  return false;
#endif
}

// y = gelu_erf(pre), slope = gelu_erf'(pre); stream: the slope streamed past the caches.
inline bool gelu_and_slope_row(const float* pre, float* y, float* slope, int64_t cols,
                               bool stream) {
#if defined(MIXLAB_HAS_LANES)
  vector_math::gelu_and_slope_row(pre, y, slope, cols, stream);
  return true;
#else
  (void)pre, (void)y, (void)slope, (void)cols, (void)stream;
  return false;
#endif
}

// y = elu(x) + 1 over n floats, or its derivative (gradient).
inline bool elu_plus_one_row(const float* x, float* y, int64_t n, bool gradient) {
#if defined(MIXLAB_HAS_LANES)
  vector_math::elu_plus_one_row(x, y, n, gradient);
  return true;
#else
  (void)x, (void)y, (void)n, (void)gradient;
  return false;
#endif
}

// y = gelu_erf'(x) over n floats.
inline bool gelu_slope_row(const float* x, float* y, int64_t n) {
#if defined(MIXLAB_HAS_LANES)
  using L = Lanes;
  for (int64_t i = 0; i < n; i += L::kWidth) {
    const L::Mask k = L::first(n - i);
    L::store(y + i, k, vector_math::gelu_grad(L::load(x + i, k)));
  }
  return true;
#else
  (void)x, (void)y, (void)n;
  return false;
#endif
}

// GLU over a row: out = a · σ(b), n floats each.
inline bool glu_row(const float* a, const float* b, float* out, int64_t n) {
#if defined(__AVX512F__)
  avx512::glu_row(a, b, out, n);
  return true;
#else
  (void)a, (void)b, (void)out, (void)n;
  return false;
#endif
}

// GLU's gradients over a row: da = g·σ(b), db = (g·a)·(σ·(1 − σ)).
inline bool glu_grad_row(const float* g, const float* a, const float* b, float* da, float* db,
                         int64_t n) {
#if defined(__AVX512F__)
  avx512::glu_grad_row(g, a, b, da, db, n);
  return true;
#else
  (void)g, (void)a, (void)b, (void)da, (void)db, (void)n;
  return false;
#endif
}

// One row of outer products, out [p, q] = x[u] · y[v], where q fits one register (q ≤ 16).
inline bool outer_row(const float* x, const float* y, float* out, int64_t p, int64_t q) {
#if defined(__AVX512F__)
  if (q > 16) return false;
  avx512::outer_row(x, y, out, p, q);
  return true;
#else
  (void)x, (void)y, (void)out, (void)p, (void)q;
  return false;
#endif
}

// Its gradients: dx[u] = Σ_v g[u, v] y[v], dy[v] = Σ_u g[u, v] x[u] (q ≤ 16).
inline bool outer_grad_row(const float* x, const float* y, const float* g, float* dx, float* dy,
                           int64_t p, int64_t q) {
#if defined(__AVX512F__)
  if (q > 16) return false;
  avx512::outer_grad_row(x, y, g, dx, dy, p, q);
  return true;
#else
  (void)x, (void)y, (void)g, (void)dx, (void)dy, (void)p, (void)q;
  return false;
#endif
}

// The spatial gate's backward over the first whole registers of a row: dg = dy ⊙ z,
// dz = dy ⊙ (g + bias), total = Σ dg over them. Returns how many elements it did (0 without
// registers); the caller does the rest of the row.
inline int64_t gate_backward_lanes(const float* dy, const float* g, float bias, const float* z,
                                   float* dg, float* dz, int64_t channels, float& total) {
  int64_t c = 0;
  total = 0.0f;
#if defined(MIXLAB_HAS_LANES)
  const Lanes::V b = Lanes::set1(bias);
  Lanes::V sum = Lanes::zero();
  for (; c + Lanes::kWidth <= channels; c += Lanes::kWidth) {
    const Lanes::V d = Lanes::loadu(dy + c);
    const Lanes::V grad_g = Lanes::mul(d, Lanes::loadu(z + c));
    Lanes::storeu(dg + c, grad_g);
    Lanes::storeu(dz + c, Lanes::mul(d, Lanes::add(Lanes::loadu(g + c), b)));
    sum = Lanes::add(sum, grad_g);
  }
  total = Lanes::sum(sum);
#else
  (void)dy, (void)g, (void)bias, (void)z, (void)dg, (void)dz, (void)channels;
#endif
  return c;
}

}  // namespace mixlab::cpu::simd
