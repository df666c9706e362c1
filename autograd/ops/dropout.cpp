// Inverted dropout with a counter-based mask: the same seed gives the same mask on any device.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed) {
  check(p >= 0.0 && p < 1.0, "dropout: rate ", p, " must be in [0, 1)");
  if (!training || p == 0.0) return x;
  check_same("dropout", {&x});
  Tensor mask = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (mask.numel() > 0) backend_of(x).dropout_mask(mask.view(), p, seed);
  return mul(x, mask);  // the mask is a constant: mul's rule gives dy * mask
}

}  // namespace mixlab
