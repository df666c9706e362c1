// The mixers' fused attention cores, one (b, h) item and one query row i at a time:
//   softmax attention     S = scale · q kᵀ + bias,  P = softmax(S) over the allowed keys,  out = P
//   v the synthesizers'     the same with the logits given as S linear attention      out_i = (q_i
//   kᵀ v) / (q_i · Σ_j k_j + eps)
// Operands are [B, H, rows, cols] strided views (ref::at). The backward passes recompute P from
// S and the saved log-sum-exp, as the contracts in backends/kernels.def say.
#include <limits>
#include <vector>

#include "backends/reference/reference_backend.h"

namespace mixlab {
namespace {

// x[b, h, :rows, :cols] = 0 for every (b, h).
template <typename T>
void zero(const View& x, int64_t rows, int64_t cols) {
  for (int64_t b = 0; b < x.shape[0]; ++b)
    for (int64_t h = 0; h < x.shape[1]; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) ref::at<T>(x, b, h, i, j) = 0;
}

// Whether key j is allowed to query i (a mask of 0/1 values; none: every key).
template <typename T>
bool allowed(const View& mask, int64_t b, int64_t h, int64_t i, int64_t j) {
  return !mask.data || ref::at<T>(mask, b, h, i, j) != T(0);
}

// Row i of S for item (b, h): scale · q_i · k_j (rounded to T) + bias[i, j]; or the logits' row.
template <typename T>
std::vector<T> attention_scores(const View& q, const View& k, const View& bias, double scale,
                                int64_t b, int64_t h, int64_t i) {
  std::vector<T> s(k.shape[2]);
  for (int64_t j = 0; j < k.shape[2]; ++j) {
    T dot = 0;
    for (int64_t c = 0; c < q.shape[3]; ++c)
      dot += ref::at<T>(q, b, h, i, c) * ref::at<T>(k, b, h, j, c);
    s[j] = T(scale) * dot;
    if (bias.data) s[j] += ref::at<T>(bias, b, h, i, j);
  }
  return s;
}
template <typename T>
std::vector<T> given_scores(const View& logits, int64_t b, int64_t h, int64_t i) {
  std::vector<T> s(logits.shape[3]);
  for (int64_t j = 0; j < logits.shape[3]; ++j) s[j] = ref::at<T>(logits, b, h, i, j);
  return s;
}

// lse = log Σ_allowed exp(s_j) (shifted by the largest allowed s_j); −inf when none is allowed.
template <typename T>
T log_sum_exp_allowed(const std::vector<T>& s, const View& mask, int64_t b, int64_t h, int64_t i) {
  T hi = -std::numeric_limits<T>::infinity(), total = 0;
  for (size_t j = 0; j < s.size(); ++j)
    if (allowed<T>(mask, b, h, i, j)) hi = s[j] > hi ? s[j] : hi;
  if (hi == -std::numeric_limits<T>::infinity()) return hi;
  for (size_t j = 0; j < s.size(); ++j)
    if (allowed<T>(mask, b, h, i, j)) total += std::exp(s[j] - hi);
  return hi + std::log(total);
}

// P_ij = exp(s_j − lse) over the allowed keys, 0 elsewhere (and everywhere when lse = −inf).
template <typename T>
std::vector<T> probabilities(const std::vector<T>& s, T lse, const View& mask, int64_t b, int64_t h,
                             int64_t i) {
  std::vector<T> p(s.size(), T(0));
  if (lse == -std::numeric_limits<T>::infinity()) return p;
  for (size_t j = 0; j < s.size(); ++j)
    if (allowed<T>(mask, b, h, i, j)) p[j] = std::exp(s[j] - lse);
  return p;
}

// The shared forward: lse_i saved, out_i = Σ_j P_ij v_j, with row_scores(b, h, i) giving S's row.
template <typename T, typename RowScores>
void softmax_core(const View& v, const View& mask, const View& out, const View& lse, int64_t n,
                  RowScores row_scores) {
  const int64_t heads = v.shape[1], e = v.shape[3];
  for (int64_t b = 0; b < v.shape[0]; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<T> s = row_scores(b, h, i);
        const T l = log_sum_exp_allowed(s, mask, b, h, i);
        lse.as<T>()[(b * heads + h) * n + i] = l;
        const std::vector<T> p = probabilities(s, l, mask, b, h, i);
        for (int64_t c = 0; c < e; ++c) {
          T sum = 0;
          for (size_t j = 0; j < p.size(); ++j) sum += p[j] * ref::at<T>(v, b, h, j, c);
          ref::at<T>(out, b, h, i, c) = sum;
        }
      }
    }
  }
}

// The shared backward: dv += P_iᵀ dout_i and dS_ij = P_ij (dout_i · v_j − dout_i · out_i), handed
// to score_grad(b, h, i, j, dS_ij) for the gradients of whatever formed S.
template <typename T, typename RowScores, typename ScoreGrad>
void softmax_core_backward(const View& v, const View& mask, const View& out, const View& lse,
                           const View& dout, const View& dv, int64_t n, RowScores row_scores,
                           ScoreGrad score_grad) {
  const int64_t heads = v.shape[1], m = v.shape[2], e = v.shape[3];
  zero<T>(dv, m, e);
  for (int64_t b = 0; b < v.shape[0]; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        const T l = lse.as<T>()[(b * heads + h) * n + i];
        const std::vector<T> p = probabilities(row_scores(b, h, i), l, mask, b, h, i);
        T dot = 0;  // dout_i · out_i = Σ_j P_ij dP_ij
        for (int64_t c = 0; c < e; ++c)
          dot += ref::at<T>(dout, b, h, i, c) * ref::at<T>(out, b, h, i, c);
        for (int64_t j = 0; j < m; ++j) {
          T dp = 0;
          for (int64_t c = 0; c < e; ++c) {
            ref::at<T>(dv, b, h, j, c) += p[j] * ref::at<T>(dout, b, h, i, c);
            dp += ref::at<T>(dout, b, h, i, c) * ref::at<T>(v, b, h, j, c);
          }
          score_grad(b, h, i, j, p[j] * (dp - dot));
        }
      }
    }
  }
}

}  // namespace

// S = scale · q kᵀ + bias, lse_i = log Σ_allowed j exp(S_ij), P = exp(S − lse) on the allowed keys,
// out = P v
void ReferenceBackend::attention(const View& q, const View& k, const View& v, const View& mask,
                                 const View& bias, double scale, const View& out, const View& lse) {
  dispatch_floating(q.dtype, "attention", [&](auto tag) {
    using T = decltype(tag);
    softmax_core<T>(v, mask, out, lse, q.shape[2], [&](int64_t b, int64_t h, int64_t i) {
      return attention_scores<T>(q, k, bias, scale, b, h, i);
    });
  });
}

// dv = Pᵀ dout, dS = P ∘ (dout vᵀ − rowsum(dout ∘ out)), dq = scale · dS k, dk = scale · dSᵀ q,
// dbias = dS
void ReferenceBackend::attention_backward(const View& q, const View& k, const View& v,
                                          const View& mask, const View& bias, double scale,
                                          const View& out, const View& lse, const View& dout,
                                          const View& dq, const View& dk, const View& dv,
                                          const View& dbias) {
  dispatch_floating(q.dtype, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = q.shape[2], d = q.shape[3];
    zero<T>(dq, n, d);
    zero<T>(dk, k.shape[2], d);
    softmax_core_backward<T>(
        v, mask, out, lse, dout, dv, n,
        [&](int64_t b, int64_t h, int64_t i) {
          return attention_scores<T>(q, k, bias, scale, b, h, i);
        },
        [&](int64_t b, int64_t h, int64_t i, int64_t j, T ds) {
          for (int64_t c = 0; c < d; ++c) {
            ref::at<T>(dq, b, h, i, c) += T(scale) * ds * ref::at<T>(k, b, h, j, c);
            ref::at<T>(dk, b, h, j, c) += T(scale) * ds * ref::at<T>(q, b, h, i, c);
          }
          if (dbias.data) ref::at<T>(dbias, b, h, i, j) = ds;
        });
  });
}

// S = the logits, lse_i = log Σ_allowed j exp(S_ij), P = exp(S − lse) on the allowed keys,
// out = P v
void ReferenceBackend::synthesized_attention(const View& logits, const View& v, const View& mask,
                                             const View& out, const View& lse) {
  dispatch_floating(v.dtype, "synthesized_attention", [&](auto tag) {
    using T = decltype(tag);
    softmax_core<T>(v, mask, out, lse, logits.shape[2], [&](int64_t b, int64_t h, int64_t i) {
      return given_scores<T>(logits, b, h, i);
    });
  });
}

// dv = Pᵀ dout, dlogits = P ∘ (dout vᵀ − rowsum(dout ∘ out))
void ReferenceBackend::synthesized_attention_backward(const View& logits, const View& v,
                                                      const View& mask, const View& out,
                                                      const View& lse, const View& dout,
                                                      const View& dlogits, const View& dv) {
  dispatch_floating(v.dtype, "synthesized_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    softmax_core_backward<T>(
        v, mask, out, lse, dout, dv, logits.shape[2],
        [&](int64_t b, int64_t h, int64_t i) { return given_scores<T>(logits, b, h, i); },
        [&](int64_t b, int64_t h, int64_t i, int64_t j, T ds) {
          ref::at<T>(dlogits, b, h, i, j) = ds;
        });
  });
}

// S = kᵀ v [D, E], z = Σ_j k_j [D], out_i = (q_i S) / (q_i · z + eps)
void ReferenceBackend::linear_attention(const View& q, const View& k, const View& v, double eps,
                                        const View& out) {
  dispatch_floating(q.dtype, "linear_attention", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = q.shape[2], m = k.shape[2], d = q.shape[3], e = v.shape[3];
    for (int64_t b = 0; b < q.shape[0]; ++b) {
      for (int64_t h = 0; h < q.shape[1]; ++h) {
        std::vector<T> S(d * e, T(0)), z(d, T(0));
        for (int64_t j = 0; j < m; ++j)
          for (int64_t a = 0; a < d; ++a) {
            z[a] += ref::at<T>(k, b, h, j, a);
            for (int64_t c = 0; c < e; ++c)
              S[a * e + c] += ref::at<T>(k, b, h, j, a) * ref::at<T>(v, b, h, j, c);
          }
        for (int64_t i = 0; i < n; ++i) {
          T den = 0;
          for (int64_t a = 0; a < d; ++a) den += ref::at<T>(q, b, h, i, a) * z[a];
          den += T(eps);
          for (int64_t c = 0; c < e; ++c) {
            T num = 0;
            for (int64_t a = 0; a < d; ++a) num += ref::at<T>(q, b, h, i, a) * S[a * e + c];
            ref::at<T>(out, b, h, i, c) = num / den;
          }
        }
      }
    }
  });
}

// With den_i = q_i · z + eps, dnum_i = dout_i / den_i, dden_i = −(dout_i · out_i) / den_i:
//   dq_i = dnum_i Sᵀ + dden_i z,  dS = Σ_i q_iᵀ dnum_i,  dz = Σ_i dden_i q_i,
//   dk_j = v_j dSᵀ + dz,  dv_j = k_j dS
void ReferenceBackend::linear_attention_backward(const View& q, const View& k, const View& v,
                                                 double eps, const View& out, const View& dout,
                                                 const View& dq, const View& dk, const View& dv) {
  dispatch_floating(q.dtype, "linear_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = q.shape[2], m = k.shape[2], d = q.shape[3], e = v.shape[3];
    for (int64_t b = 0; b < q.shape[0]; ++b) {
      for (int64_t h = 0; h < q.shape[1]; ++h) {
        std::vector<T> S(d * e, T(0)), z(d, T(0)), dS(d * e, T(0)), dz(d, T(0));
        for (int64_t j = 0; j < m; ++j)
          for (int64_t a = 0; a < d; ++a) {
            z[a] += ref::at<T>(k, b, h, j, a);
            for (int64_t c = 0; c < e; ++c)
              S[a * e + c] += ref::at<T>(k, b, h, j, a) * ref::at<T>(v, b, h, j, c);
          }
        for (int64_t i = 0; i < n; ++i) {
          T den = 0, dot = 0;
          for (int64_t a = 0; a < d; ++a) den += ref::at<T>(q, b, h, i, a) * z[a];
          den += T(eps);
          for (int64_t c = 0; c < e; ++c)
            dot += ref::at<T>(dout, b, h, i, c) * ref::at<T>(out, b, h, i, c);
          const T dden = -dot / den;
          for (int64_t a = 0; a < d; ++a) {
            T g = dden * z[a];
            for (int64_t c = 0; c < e; ++c) {
              const T dnum = ref::at<T>(dout, b, h, i, c) / den;
              g += dnum * S[a * e + c];
              dS[a * e + c] += ref::at<T>(q, b, h, i, a) * dnum;
            }
            ref::at<T>(dq, b, h, i, a) = g;
            dz[a] += dden * ref::at<T>(q, b, h, i, a);
          }
        }
        for (int64_t j = 0; j < m; ++j) {
          for (int64_t a = 0; a < d; ++a) {
            T g = dz[a];
            for (int64_t c = 0; c < e; ++c) g += ref::at<T>(v, b, h, j, c) * dS[a * e + c];
            ref::at<T>(dk, b, h, j, a) = g;
          }
          for (int64_t c = 0; c < e; ++c) {
            T g = 0;
            for (int64_t a = 0; a < d; ++a) g += ref::at<T>(k, b, h, j, a) * dS[a * e + c];
            ref::at<T>(dv, b, h, j, c) = g;
          }
        }
      }
    }
  });
}

}  // namespace mixlab
