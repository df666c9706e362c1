// Long convolutions along the tokens by FFT, shared by s4d (mixers.md §16) and hyena (§18):
// y[b, i, c] = Σ_j k[i − j, c] · x[b, j, c] over i, j < N, for kernels as long as the sequence.
// Computed by the `circular_conv` op (real FFTs on the CPU and GPU, forward and backward in one
// kernel pair): O(N log N) per channel where the Toeplitz product is O(N²).
#pragma once
#include "autograd/tensor.h"

namespace mixlab::mixers {

// The FFT length used for a sequence of n tokens: the smallest 2^a·3^b·5^c ≥ 2n (FFTW and cuFFT
// are fastest on such sizes; ≥ 2n so that the circular convolution never wraps onto itself).
int64_t fft_length(int64_t n);

// x [B, N, d] convolved with a kernel laid out for a circular convolution of length L =
// kernel.size(0) ≥ 2N − 1 ([L, d]): lag l ≥ 0 at row l, lag −m (m ≥ 1, a later input) at row
// L − m. Returns y [B, N, d], y[b, i] = Σ_{j<N} kernel[(i − j) mod L] · x[b, j].
Tensor circular_fft_conv(const Tensor& x, const Tensor& kernel);

// The causal convolution (h *_c x)[i] = Σ_{j≤i} h[i − j] x[j] of x [B, N, d] with h [≥ N, d]
// (rows beyond N − 1 are ignored): circular_fft_conv with h's first N lags and zeros above.
Tensor causal_fft_conv(const Tensor& x, const Tensor& h);

// The Toeplitz matrices of per-channel kernels as [d, N, N]: T[c, i, j] = lags[i − j, c] for
// j ≤ i and, when `later` ([≥ N − 1, d], lag m = 1… at row m − 1) is defined,
// later[j − i − 1, c] above the diagonal; 0 there otherwise. For inspect (nn/mixing_capture.h).
Tensor toeplitz_matrices(const Tensor& lags, const Tensor& later, int64_t n);

}  // namespace mixlab::mixers
