// Row kernels over [rows, cols] (cols contiguous): softmax, layer norm, cross-entropy, and the
// fused row passes of a linear layer (bias and GELU), ResMLP's affine map, GLU and the sum
// normalisation, each forward beside its backward.
#include <limits>
#include <vector>

#include "backends/fused_ops.h"
#include "backends/reference/reference_backend.h"

namespace mixlab {

// y = exp(x − max x) / Σ exp(x − max x)   or, log: y = x − (max x + log Σ exp(x − max x))
void ReferenceBackend::softmax(const View& x, const View& y, int64_t rows, int64_t cols, bool log) {
  dispatch_floating(x.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      const T* in = x.as<T>() + r * cols;
      T* out = y.as<T>() + r * cols;
      T hi = -std::numeric_limits<T>::infinity(), total = 0;
      for (int64_t i = 0; i < cols; ++i) hi = in[i] > hi ? in[i] : hi;
      for (int64_t i = 0; i < cols; ++i) total += std::exp(in[i] - hi);
      for (int64_t i = 0; i < cols; ++i)
        out[i] = log ? in[i] - (hi + std::log(total)) : std::exp(in[i] - hi) / total;
    }
  });
}

// dx = y ∘ (dy − Σ dy ∘ y)   or, log: dx = dy − exp(y) · Σ dy
void ReferenceBackend::softmax_backward(const View& y, const View& dy, const View& dx, int64_t rows,
                                        int64_t cols, bool log) {
  dispatch_floating(y.dtype, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      const T* py = y.as<T>() + r * cols;
      const T* g = dy.as<T>() + r * cols;
      T* d = dx.as<T>() + r * cols;
      T sum = 0;
      for (int64_t i = 0; i < cols; ++i) sum += log ? g[i] : g[i] * py[i];
      for (int64_t i = 0; i < cols; ++i)
        d[i] = log ? g[i] - std::exp(py[i]) * sum : py[i] * (g[i] - sum);
    }
  });
}

// y = (x − mean) · rstd · gamma + beta per row (ref::layer_norm_row), mean and rstd saved.
void ReferenceBackend::layer_norm(const View& x, const View& gamma, const View& beta, const View& y,
                                  const View& mean, const View& rstd, int64_t rows, int64_t cols,
                                  double eps) {
  dispatch_floating(x.dtype, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r)
      ref::layer_norm_row(x.as<T>() + r * cols, gamma.as<T>(), beta.as<T>(), y.as<T>() + r * cols,
                          cols, T(eps), mean.as<T>()[r], rstd.as<T>()[r]);
  });
}

// With x̂ = (x − mean) · rstd and g = dy ∘ gamma:
//   dx = rstd · (g − mean(g) − x̂ · mean(g ∘ x̂))   (added to dx when accumulating)
//   dgamma = Σ_rows dy ∘ x̂,  dbeta = Σ_rows dy
void ReferenceBackend::layer_norm_backward(const View& dy, const View& x, const View& mean,
                                           const View& rstd, const View& gamma, const View& dx,
                                           const View& dgamma, const View& dbeta, int64_t rows,
                                           int64_t cols, bool accumulate) {
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> dg(cols, T(0)), db(cols, T(0)), xhat(cols), g(cols);
    for (int64_t r = 0; r < rows; ++r) {
      const T* px = x.as<T>() + r * cols;
      const T* pg = dy.as<T>() + r * cols;
      T* pd = dx.as<T>() + r * cols;
      const T m = mean.as<T>()[r], rs = rstd.as<T>()[r];
      T mean_g = 0, mean_gx = 0;
      for (int64_t i = 0; i < cols; ++i) {
        xhat[i] = (px[i] - m) * rs;
        g[i] = gamma.data ? pg[i] * gamma.as<T>()[i] : pg[i];
        mean_g += g[i];
        mean_gx += g[i] * xhat[i];
        dg[i] += pg[i] * xhat[i];
        db[i] += pg[i];
      }
      mean_g /= T(cols);
      mean_gx /= T(cols);
      for (int64_t i = 0; i < cols; ++i) {
        const T d = rs * (g[i] - mean_g - xhat[i] * mean_gx);
        pd[i] = accumulate ? pd[i] + d : d;
      }
    }
    for (int64_t i = 0; i < cols; ++i) {
      if (dgamma.data) dgamma.as<T>()[i] = dg[i];
      if (dbeta.data) dbeta.as<T>()[i] = db[i];
    }
  });
}

// lse = log Σ exp(z) (shifted by max z); with q = (1 − ε) onehot(t) + ε / C,
//   loss = −Σ_i q_i (z_i − lse) = (1 − ε)(lse − z_t) + ε (lse − mean z);  0 where t is ignored
void ReferenceBackend::cross_entropy(const View& logits, const View& targets, const View& loss,
                                     const View& lse, int64_t rows, int64_t cols,
                                     int64_t ignore_index, double smoothing) {
  dispatch_floating(logits.dtype, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T eps = T(smoothing);
    for (int64_t r = 0; r < rows; ++r) {
      const T* z = logits.as<T>() + r * cols;
      T hi = -std::numeric_limits<T>::infinity(), total = 0, zsum = 0;
      for (int64_t i = 0; i < cols; ++i) hi = z[i] > hi ? z[i] : hi;
      for (int64_t i = 0; i < cols; ++i) total += std::exp(z[i] - hi);
      for (int64_t i = 0; i < cols; ++i) zsum += z[i];
      const T l = hi + std::log(total);
      lse.as<T>()[r] = l;
      const int64_t t = targets.as<int32_t>()[r];
      loss.as<T>()[r] =
          t == ignore_index ? T(0) : (T(1) - eps) * (l - z[t]) + eps * (l - zsum / T(cols));
    }
  });
}

// dz_i = scale · (softmax(z)_i − q_i) = scale · (exp(z_i − lse) − ε / C − (1 − ε)[i = t])
void ReferenceBackend::cross_entropy_backward(const View& logits, const View& targets,
                                              const View& lse, const View& scale,
                                              const View& dlogits, int64_t rows, int64_t cols,
                                              int64_t ignore_index, double smoothing) {
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T eps = T(smoothing);
    for (int64_t r = 0; r < rows; ++r) {
      const T* z = logits.as<T>() + r * cols;
      T* d = dlogits.as<T>() + r * cols;
      const int64_t t = targets.as<int32_t>()[r];
      const T s = scale.as<T>()[r], l = lse.as<T>()[r];
      for (int64_t i = 0; i < cols; ++i)
        d[i] = t == ignore_index ? T(0) : s * (std::exp(z[i] - l) - eps / T(cols));
      if (t != ignore_index) d[t] -= s * (T(1) - eps);
    }
  });
}

// pre = x + bias;  y = gelu(pre) when y is wanted
void ReferenceBackend::bias_act(const View& x, const View& bias, const View& pre, const View& y,
                                int64_t rows, int64_t cols) {
  dispatch_floating(x.dtype, "bias_act", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < rows * cols; ++i) {
      T p;
      const T out = fused::bias_gelu<ref::Math>(x.as<T>()[i], bias.as<T>()[i % cols], p);
      pre.as<T>()[i] = p;
      if (y.data) y.as<T>()[i] = out;
    }
  });
}

// dx = dy · gelu'(pre),  dbias[c] = Σ_r dx[r, c]
void ReferenceBackend::bias_gelu_backward(const View& dy, const View& pre, const View& dx,
                                          const View& dbias, int64_t rows, int64_t cols) {
  dispatch_floating(dy.dtype, "bias_gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t c = 0; c < cols; ++c) dbias.as<T>()[c] = 0;
    for (int64_t i = 0; i < rows * cols; ++i) {
      dx.as<T>()[i] = fused::bias_gelu_grad<ref::Math>(dy.as<T>()[i], pre.as<T>()[i]);
      dbias.as<T>()[i % cols] += dx.as<T>()[i];
    }
  });
}

// y[r, c] = x[r, c] · scale[c] (+ shift[c])
void ReferenceBackend::scale_shift(const View& x, const View& scale, const View& shift,
                                   const View& y, int64_t rows, int64_t cols) {
  dispatch_floating(x.dtype, "scale_shift", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const T v = x.as<T>()[i] * scale.as<T>()[i % cols];
      y.as<T>()[i] = shift.data ? v + shift.as<T>()[i % cols] : v;
    }
  });
}

// dx = dy · scale,  dscale[c] = Σ_r dy[r, c] · x[r, c],  dshift[c] = Σ_r dy[r, c]
void ReferenceBackend::scale_shift_backward(const View& dy, const View& x, const View& scale,
                                            const View& dx, const View& dscale, const View& dshift,
                                            int64_t rows, int64_t cols) {
  dispatch_floating(dy.dtype, "scale_shift_backward", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t c = 0; c < cols; ++c) {
      T ds = 0, dt = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const T g = dy.as<T>()[r * cols + c];
        dx.as<T>()[r * cols + c] = g * scale.as<T>()[c];
        ds += g * x.as<T>()[r * cols + c];
        dt += g;
      }
      dscale.as<T>()[c] = ds;
      if (dshift.data) dshift.as<T>()[c] = dt;
    }
  });
}

// y[r, c] = a · σ(b) with a = x[r, c], b = x[r, cols + c]
void ReferenceBackend::glu(const View& x, const View& y, int64_t rows, int64_t cols) {
  dispatch_floating(x.dtype, "glu", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        y.as<T>()[r * cols + c] =
            fused::glu<ref::Math>(x.as<T>()[r * 2 * cols + c], x.as<T>()[r * 2 * cols + cols + c]);
  });
}

// da = dy · σ(b),  db = dy · a · σ(b)(1 − σ(b))
void ReferenceBackend::glu_backward(const View& dy, const View& x, const View& dx, int64_t rows,
                                    int64_t cols) {
  dispatch_floating(x.dtype, "glu_backward", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      const T* a = x.as<T>() + r * 2 * cols;
      T* da = dx.as<T>() + r * 2 * cols;
      for (int64_t c = 0; c < cols; ++c)
        fused::glu_grad<ref::Math>(dy.as<T>()[r * cols + c], a[c], a[cols + c], da[c],
                                   da[cols + c]);
    }
  });
}

// denom[o, i] = eps + Σ_l x[o, l, i],  y[o, l, i] = x[o, l, i] / denom[o, i]
void ReferenceBackend::sum_normalize(const View& x, const View& y, const View& denom, int64_t outer,
                                     int64_t length, int64_t inner, double eps) {
  dispatch_floating(x.dtype, "sum_normalize", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        T sum = 0;
        for (int64_t l = 0; l < length; ++l) sum += x.as<T>()[(o * length + l) * inner + i];
        const T d = sum + T(eps);
        denom.as<T>()[o * inner + i] = d;
        for (int64_t l = 0; l < length; ++l)
          y.as<T>()[(o * length + l) * inner + i] = x.as<T>()[(o * length + l) * inner + i] / d;
      }
    }
  });
}

// dx[o, l, i] = (dy[o, l, i] − Σ_l' dy[o, l', i] · y[o, l', i]) / denom[o, i]
void ReferenceBackend::sum_normalize_backward(const View& dy, const View& y, const View& denom,
                                              const View& dx, int64_t outer, int64_t length,
                                              int64_t inner) {
  dispatch_floating(dy.dtype, "sum_normalize_backward", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t l) { return (o * length + l) * inner + i; };
        T dot = 0;
        for (int64_t l = 0; l < length; ++l) dot += dy.as<T>()[at(l)] * y.as<T>()[at(l)];
        for (int64_t l = 0; l < length; ++l)
          dx.as<T>()[at(l)] = (dy.as<T>()[at(l)] - dot) / denom.as<T>()[o * inner + i];
      }
    }
  });
}

}  // namespace mixlab
