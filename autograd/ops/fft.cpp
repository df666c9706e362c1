// Fourier transforms. Both are linear maps whose adjoint is known in closed form, so backward
// is again a transform: the complex DFT's adjoint is the unnormalised inverse DFT, and the real
// part of the 2-D DFT is self-adjoint (C X C - S X S with symmetric C and S). The circular
// convolution (computed by FFT on the CPU and GPU) is bilinear: its gradients are the
// correlations of dy with the other factor, one kernel for both.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor fft(const Tensor& x, int64_t axis, bool inverse) {
  check_same("fft", {&x});
  check(x.dim() >= 2 && x.size(-1) == 2, "fft: expects [..., 2] (real, imaginary) pairs, got ",
        shape_str(x.shape()));
  int a = normalize_axis(axis, x.dim() - 1, "fft", x.shape());
  int64_t outer = 1, inner = 1, n = x.shape()[a];
  for (int i = 0; i < a; ++i) outer *= x.shape()[i];
  for (int i = a + 1; i < x.dim() - 1; ++i) inner *= x.shape()[i];
  Tensor in = dense(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) backend_of(x).fft(in.view(), y.view(), outer, n, inner, inverse);
  return record("fft", y, {x},
                [a, inverse](const Tensor& g) { return std::vector<Tensor>{fft(g, a, !inverse)}; });
}

Tensor fft2_real(const Tensor& x, const Tensor& lengths) {
  check_same("fft2_real", {&x});
  check(x.dim() >= 2, "fft2_real: expects [..., n, d], got ", shape_str(x.shape()));
  int64_t n = x.size(-2), d = x.size(-1), batch = (n > 0 && d > 0) ? x.numel() / (n * d) : 0;
  Tensor lens;
  if (lengths.defined()) {
    check(lengths.dtype() == DType::I32 && lengths.numel() == batch, "fft2_real: lengths must be ",
          batch, " int32 values for input ", shape_str(x.shape()), ", got ",
          shape_str(lengths.shape()));
    check(lengths.device() == x.device(), "fft2_real: lengths on ", lengths.device().str(),
          ", input on ", x.device().str());
    lens = dense(lengths);
    const std::string why = "outside [0, " + std::to_string(n) + "]";
    backend_of(lens).check_indices(lens.view(), n + 1, kNoIndexAllowed, "fft2_real: length",
                                   why.c_str());
  }
  Tensor in = dense(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0)
    backend_of(x).fft2_real(in.view(), view_or_none(lens, DType::I32), y.view(), batch, n, d);
  return record("fft2_real", y, {x},
                [lens](const Tensor& g) { return std::vector<Tensor>{fft2_real(g, lens)}; });
}

// y[b, i, c] = Σ_{j<N} k[(i − j) mod L, c] · x[b, j, c] for x [B, N, d], k [L ≥ 2N − 1, d].
// Backward: dx[b, j] = Σ_i k[(i − j) mod L] · dy[b, i], dk[l] = Σ_b Σ_i dy[b, i] · x[b, i − l].
// The backward keeps x and k, not their spectra: a backend transforms them again (one more
// transform per item and one for k) rather than hold B·d·(L/2 + 1) complex numbers per call
// until the backward pass, about twice the memory of x for L = 2N.
Tensor circular_conv(const Tensor& x, const Tensor& kernel) {
  check_same("circular_conv", {&x, &kernel});
  check(x.dim() == 3 && kernel.dim() == 2 && kernel.size(1) == x.size(2) &&
            kernel.size(0) >= std::max<int64_t>(2 * x.size(1) - 1, 1),
        "circular_conv: needs x [B, N, d] and a kernel [L ≥ 2N − 1, d], got x ",
        shape_str(x.shape()), ", kernel ", shape_str(kernel.shape()));
  const int64_t batch = x.size(0), n = x.size(1), d = x.size(2), length = kernel.size(0);
  Tensor in = dense(x), k = dense(kernel);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0)
    backend_of(x).circular_conv(in.view(), k.view(), y.view(), batch, n, d, length);
  return record("circular_conv", y, {x, kernel}, [in, k, batch, n, d, length](const Tensor& g) {
    Tensor gd = dense(g);
    Tensor dx = Tensor::empty(in.shape(), in.dtype(), in.device());
    Tensor dk = dx.numel() > 0 ? Tensor::empty(k.shape(), k.dtype(), k.device())
                               : Tensor::zeros(k.shape(), k.dtype(), k.device());
    if (dx.numel() > 0)
      backend_of(in).circular_conv_backward(in.view(), k.view(), gd.view(), dx.view(), dk.view(),
                                            batch, n, d, length);
    return std::vector<Tensor>{dx, dk};
  });
}

}  // namespace mixlab
