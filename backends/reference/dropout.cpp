// Dropout: element i of the mask keyed by `seed` is 1/(1 − p) when dropout_kept(mix64(seed), i,
// dropout_threshold(p)) (core/random.h, the one draw every device makes), else 0.
#include <vector>

#include "backends/fused_ops.h"
#include "backends/reference/reference_backend.h"
#include "core/random.h"

namespace mixlab {
namespace {

// mask(p, seed)[i] for i in [0, n), in T.
template <typename T>
std::vector<T> mask_of(int64_t n, double p, uint64_t seed) {
  std::vector<T> mask(n);
  const uint64_t mixed = mix64(seed), threshold = dropout_threshold(p);
  for (int64_t i = 0; i < n; ++i)
    mask[i] = fused::dropout_factor<T>(mixed, uint64_t(i), threshold, fused::dropout_keep<T>(p));
  return mask;
}

}  // namespace

// mask[i] = mask(p, seed)[i]
void ReferenceBackend::dropout_mask(const View& mask, double p, uint64_t seed) {
  dispatch_floating(mask.dtype, "dropout_mask", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> m = mask_of<T>(mask.numel(), p, seed);
    for (int64_t i = 0; i < mask.numel(); ++i) mask.as<T>()[i] = m[i];
  });
}

// y[i] = x[i] · mask(p, seed)[i]
void ReferenceBackend::dropout_apply(const View& x, const View& y, double p, uint64_t seed) {
  dispatch_floating(x.dtype, "dropout_apply", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> m = mask_of<T>(x.numel(), p, seed);
    for (int64_t i = 0; i < x.numel(); ++i) y.as<T>()[i] = x.as<T>()[i] * m[i];
  });
}

// sum = x + h · mask(p, seed), then y = layer_norm(sum) when y is wanted.
void ReferenceBackend::add_dropout_layer_norm(const View& x, const View& h, const View& gamma,
                                              const View& beta, const View& sum, const View& y,
                                              const View& mean, const View& rstd, int64_t rows,
                                              int64_t cols, double p, uint64_t seed, double eps) {
  dispatch_floating(x.dtype, "add_dropout_layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> m = mask_of<T>(rows * cols, p, seed);
    for (int64_t i = 0; i < rows * cols; ++i) sum.as<T>()[i] = x.as<T>()[i] + h.as<T>()[i] * m[i];
  });
  if (y.data) layer_norm(sum, gamma, beta, y, mean, rstd, rows, cols, eps);
}

}  // namespace mixlab
