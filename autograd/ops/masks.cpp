// Constant masks built on the host: causal (tril) and valid-length masks.
#include "autograd/ops/op_utils.h"

namespace mixlab {

Tensor tril_mask(int64_t n, int64_t m, int64_t diagonal, DType dtype, Device device) {
  std::vector<double> v(n * m);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) v[i * m + j] = j <= i + diagonal ? 1.0 : 0.0;
  return Tensor::from_data(v, {n, m}).to(dtype).to(device);
}

Tensor length_mask(const std::vector<int32_t>& lengths, int64_t n, DType dtype, Device device) {
  int64_t b = static_cast<int64_t>(lengths.size());
  std::vector<double> v(b * n);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < n; ++j) v[i * n + j] = j < lengths[i] ? 1.0 : 0.0;
  return Tensor::from_data(v, {b, n}).to(dtype).to(device);
}

}  // namespace mixlab
