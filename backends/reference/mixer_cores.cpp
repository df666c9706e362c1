// The other mixers' fused cores: lightconv's and dynconv's depthwise token convolution, external
// attention's memory weights (a softmax over the tokens, then a normalisation over the slots),
// and gMLP's spatial gate. Each is the sequence of plain steps its contract in
// backends/kernels.def describes.
#include <algorithm>
#include <limits>
#include <vector>

#include "backends/reference/reference_backend.h"

namespace mixlab {
namespace {

// The taps of output row (b, t), head h, tap m: taps [Bt, Nt, H, K] shared over the batch
// (Bt = 1) and/or the positions (Nt = 1).
template <typename T>
T& tap(const View& taps, int64_t b, int64_t t, int64_t h, int64_t m) {
  const int64_t bt = taps.shape[0] == 1 ? 0 : b, tt = taps.shape[1] == 1 ? 0 : t;
  return taps.as<T>()[((bt * taps.shape[1] + tt) * taps.shape[2] + h) * taps.shape[3] + m];
}

}  // namespace

// out[b, t, c] = Σ_{m<K} taps[b, t, h(c), m] · g[b, t + m − left, c]   (g is 0 outside [0, N)),
// with h(c) = ⌊c / (d/H)⌋
void ReferenceBackend::token_conv(const View& g, const View& taps, int64_t left, const View& out) {
  dispatch_floating(g.dtype, "token_conv", [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = g.shape[0], N = g.shape[1], d = g.shape[2], K = taps.shape[3];
    const int64_t per_head = d / taps.shape[2];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < N; ++t)
        for (int64_t c = 0; c < d; ++c) {
          T sum = 0;
          for (int64_t m = 0; m < K; ++m) {
            const int64_t s = t + m - left;
            if (s >= 0 && s < N)
              sum += tap<T>(taps, b, t, c / per_head, m) * g.as<T>()[(b * N + s) * d + c];
          }
          out.as<T>()[(b * N + t) * d + c] = sum;
        }
  });
}

// For each term of the forward sum, out[b, t, c] ← taps[.., m] · g[b, s, c] with s = t + m − left:
//   dg[b, s, c] += taps[b, t, h(c), m] · dout[b, t, c],  dtaps[b, t, h(c), m] += dout[b, t, c] ·
//   g[b, s, c]
void ReferenceBackend::token_conv_backward(const View& g, const View& taps, const View& dout,
                                           int64_t left, const View& dg, const View& dtaps) {
  dispatch_floating(g.dtype, "token_conv_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = g.shape[0], N = g.shape[1], d = g.shape[2], K = taps.shape[3];
    const int64_t per_head = d / taps.shape[2];
    for (int64_t i = 0; i < dg.numel(); ++i) dg.as<T>()[i] = 0;
    for (int64_t i = 0; i < dtaps.numel(); ++i) dtaps.as<T>()[i] = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < N; ++t)
        for (int64_t c = 0; c < d; ++c)
          for (int64_t m = 0; m < K; ++m) {
            const int64_t s = t + m - left;
            if (s < 0 || s >= N) continue;
            const T grad = dout.as<T>()[(b * N + t) * d + c];
            dg.as<T>()[(b * N + s) * d + c] += tap<T>(taps, b, t, c / per_head, m) * grad;
            tap<T>(dtaps, b, t, c / per_head, m) += grad * g.as<T>()[(b * N + s) * d + c];
          }
  });
}

// For each item (b, g) and slot s, over the valid tokens n:
//   P[n, s] = exp(L[n, s] − max_n' L[n', s]) / Σ_n' exp(L[n', s] − max)   (0 at an invalid token)
//   denom[n] = eps + Σ_s P[n, s],  weights[n, s] = P[n, s] / denom[n]
void ReferenceBackend::token_softmax_normalize(const View& logits, const View& valid,
                                               const View& weights, const View& denom,
                                               int64_t batch, int64_t tokens, int64_t groups,
                                               int64_t slots, double eps) {
  dispatch_floating(logits.dtype, "token_softmax_normalize", [&](auto tag) {
    using T = decltype(tag);
    auto at = [&](int64_t b, int64_t n, int64_t g, int64_t s) {
      return ((b * tokens + n) * groups + g) * slots + s;
    };
    auto is_valid = [&](int64_t b, int64_t n) {
      return !valid.data || valid.as<T>()[b * tokens + n] != T(0);
    };
    std::vector<T> P(tokens * slots);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t s = 0; s < slots; ++s) {  // the softmax over the tokens, per slot
          T hi = -std::numeric_limits<T>::infinity(), total = 0;
          for (int64_t n = 0; n < tokens; ++n)
            if (is_valid(b, n)) hi = std::max(hi, logits.as<T>()[at(b, n, g, s)]);
          for (int64_t n = 0; n < tokens; ++n)
            if (is_valid(b, n)) total += std::exp(logits.as<T>()[at(b, n, g, s)] - hi);
          for (int64_t n = 0; n < tokens; ++n)
            P[n * slots + s] =
                is_valid(b, n) ? std::exp(logits.as<T>()[at(b, n, g, s)] - hi) / total : T(0);
        }
        for (int64_t n = 0; n < tokens; ++n) {  // the normalisation over the slots, per token
          T sum = 0;
          for (int64_t s = 0; s < slots; ++s) sum += P[n * slots + s];
          const T den = T(eps) + sum;
          denom.as<T>()[(b * tokens + n) * groups + g] = den;
          for (int64_t s = 0; s < slots; ++s)
            weights.as<T>()[at(b, n, g, s)] = P[n * slots + s] / den;
        }
      }
    }
  });
}

// Per item (b, g), with P = W ∘ denom:
//   dP[n, s] = (dW[n, s] − Σ_s' dW[n, s'] W[n, s']) / denom[n]
//   dL[n, s] = P[n, s] (dP[n, s] − Σ_n' P[n', s] dP[n', s]),  slot_sums[b, g, s] = Σ_n dL[n, s]
void ReferenceBackend::token_softmax_normalize_backward(const View& dweights, const View& weights,
                                                        const View& denom, const View& dlogits,
                                                        const View& slot_sums, int64_t batch,
                                                        int64_t tokens, int64_t groups,
                                                        int64_t slots) {
  dispatch_floating(weights.dtype, "token_softmax_normalize_backward", [&](auto tag) {
    using T = decltype(tag);
    auto at = [&](int64_t b, int64_t n, int64_t g, int64_t s) {
      return ((b * tokens + n) * groups + g) * slots + s;
    };
    std::vector<T> P(tokens * slots), dP(tokens * slots);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t n = 0; n < tokens; ++n) {
          const T den = denom.as<T>()[(b * tokens + n) * groups + g];
          T dot = 0;
          for (int64_t s = 0; s < slots; ++s)
            dot += dweights.as<T>()[at(b, n, g, s)] * weights.as<T>()[at(b, n, g, s)];
          for (int64_t s = 0; s < slots; ++s) {
            P[n * slots + s] = weights.as<T>()[at(b, n, g, s)] * den;
            dP[n * slots + s] = (dweights.as<T>()[at(b, n, g, s)] - dot) / den;
          }
        }
        for (int64_t s = 0; s < slots; ++s) {
          T dot = 0, sum = 0;
          for (int64_t n = 0; n < tokens; ++n) dot += P[n * slots + s] * dP[n * slots + s];
          for (int64_t n = 0; n < tokens; ++n) {
            const T dl = P[n * slots + s] * (dP[n * slots + s] - dot);
            dlogits.as<T>()[at(b, n, g, s)] = dl;
            sum += dl;
          }
          if (slot_sums.data) slot_sums.as<T>()[(b * groups + g) * slots + s] = sum;
        }
      }
    }
  });
}

// y[b, t, c] = z[b, t, c] · (g[b, t, c] + bias[t])
void ReferenceBackend::spatial_gate(const View& g, const View& bias, const View& z, const View& y,
                                    int64_t batch, int64_t tokens, int64_t channels) {
  dispatch_floating(g.dtype, "spatial_gate", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < batch * tokens; ++r)
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t i = r * channels + c;
        y.as<T>()[i] = z.as<T>()[i] * (g.as<T>()[i] + bias.as<T>()[r % tokens]);
      }
  });
}

// dg = dy ∘ z,  dz = dy ∘ (g + bias[t]),  row_sums[b·tokens + t] = Σ_c dg[b, t, c]
void ReferenceBackend::spatial_gate_backward(const View& dy, const View& g, const View& bias,
                                             const View& z, const View& dg, const View& dz,
                                             const View& row_sums, int64_t batch, int64_t tokens,
                                             int64_t channels) {
  dispatch_floating(g.dtype, "spatial_gate_backward", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < batch * tokens; ++r) {
      T sum = 0;
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t i = r * channels + c;
        const T grad = dy.as<T>()[i], gate = g.as<T>()[i] + bias.as<T>()[r % tokens];
        dg.as<T>()[i] = grad * z.as<T>()[i];
        dz.as<T>()[i] = grad * gate;
        sum += dg.as<T>()[i];
      }
      row_sums.as<T>()[r] = sum;
    }
  });
}

}  // namespace mixlab
