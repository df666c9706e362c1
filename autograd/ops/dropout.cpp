// Inverted dropout with a counter-based mask: the same seed gives the same mask on any device.
// The mask is generated inside the kernel that applies it (dropout_apply), forward and backward,
// so it is never stored: the backward regenerates it from the seed.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed) {
  check(p >= 0.0 && p < 1.0, "dropout: rate ", p, " must be in [0, 1)");
  if (!training || p == 0.0) return x;
  check_same("dropout", {&x});
  Tensor in = dense(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) backend_of(x).dropout_apply(in.view(), y.view(), p, seed);
  // dy * mask is dropout of dy with the same seed (recorded, so it differentiates again).
  return record("dropout", y, {x}, [p, seed](const Tensor& g) {
    return std::vector<Tensor>{dropout(g, p, true, seed)};
  });
}

}  // namespace mixlab
