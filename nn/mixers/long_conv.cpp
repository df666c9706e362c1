// Long convolutions by FFT (nn/mixers/long_conv.h). The convolution itself is the
// `circular_conv` op (autograd/ops/fft.cpp): on the CPU and GPU it applies the convolution
// theorem for a circular convolution of length L, DFT(k ⊛ x) = DFT(k) ⊙ DFT(x), with real
// transforms, and its backward is two correlations by the same transforms; the reference backend
// sums the definition directly.
#include "nn/mixers/long_conv.h"

#include <vector>

#include "autograd/ops.h"
#include "core/error.h"

namespace mixlab::mixers {
namespace {

// x [n, ...] followed by zero rows to `length` rows along axis `axis`.
Tensor pad_axis(const Tensor& x, int64_t axis, int64_t length) {
  int64_t n = x.size(axis);
  if (n == length) return x;
  Shape zeros = x.shape();
  zeros[axis] = length - n;
  return concat({x, Tensor::zeros(zeros, x.dtype(), x.device())}, axis);
}

}  // namespace

int64_t fft_length(int64_t n) {
  int64_t length = std::max<int64_t>(2 * n, 1);
  for (;; ++length) {
    int64_t m = length;
    for (int64_t p : {2, 3, 5})
      while (m % p == 0) m /= p;
    if (m == 1) return length;
  }
}

Tensor circular_fft_conv(const Tensor& x, const Tensor& kernel) {
  check(x.dim() == 3 && kernel.dim() == 2 && kernel.size(1) == x.size(2) &&
            kernel.size(0) >= 2 * x.size(1) - 1,
        "circular_fft_conv: needs x [B, N, d] and a kernel [L ≥ 2N − 1, d], got x ",
        shape_str(x.shape()), ", kernel ", shape_str(kernel.shape()));
  return circular_conv(x, kernel);
}

Tensor causal_fft_conv(const Tensor& x, const Tensor& h) {
  check(h.dim() == 2 && h.size(0) >= x.size(1), "causal_fft_conv: needs h [≥ N, d] for x ",
        shape_str(x.shape()), ", got h ", shape_str(h.shape()));
  int64_t n = x.size(1);
  return circular_fft_conv(x, pad_axis(narrow(h, 0, 0, n), 0, fft_length(n)));
}

Tensor toeplitz_matrices(const Tensor& lags, const Tensor& later, int64_t n) {
  int64_t d = lags.size(1);
  // One table of rows to gather from: the lags 0…N−1, then the later lags 1…N−1 (or one row
  // of zeros for the entries above the diagonal).
  Tensor table =
      later.defined()
          ? concat({narrow(lags, 0, 0, n), narrow(later, 0, 0, n - 1)}, 0)
          : concat({narrow(lags, 0, 0, n), Tensor::zeros({1, d}, lags.dtype(), lags.device())}, 0);
  std::vector<int32_t> index(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      index[i * n + j] =
          static_cast<int32_t>(j <= i ? i - j : (later.defined() ? n + j - i - 1 : n));
  Tensor rows = select_rows(table, Tensor::from_data(index, {n * n}, lags.device()));
  return contiguous(permute(reshape(rows, {n, n, d}), {2, 0, 1}));
}

}  // namespace mixlab::mixers
