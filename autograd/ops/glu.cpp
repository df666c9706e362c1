// GLU(a‖b) = a ⊙ σ(b), x split in half along its last axis, as one kernel each way (lightconv's
// and dynconv's input gate): the unfused split, sigmoid and mul took three passes forward (one
// a copy of the strided half) and seven backward. Per-element formulas: backends/fused_ops.h,
// the unfused rules' own.
//
//   forward:   y = a σ(b)
//   backward:  da = dy σ(b),  db = (dy a) σ(b)(1 − σ(b))
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor glu(const Tensor& x) {
  check(x.dim() >= 1 && x.size(-1) % 2 == 0, "glu: last dimension of ", shape_str(x.shape()),
        " must be even");
  const int64_t cols = x.size(-1) / 2, rows = cols ? x.numel() / (2 * cols) : 0;
  Shape shape = x.shape();
  shape.back() = cols;
  Tensor in = dense(x);
  Tensor y = Tensor::empty(shape, x.dtype(), x.device());
  if (rows * cols > 0) backend_of(x).glu(in.view(), y.view(), rows, cols);
  return record("glu", y, {x}, [in = in.detach(), rows, cols](const Tensor& g) {
    Tensor gd = dense(g);
    Tensor dx = Tensor::empty(in.shape(), in.dtype(), in.device());
    if (rows * cols > 0) backend_of(in).glu_backward(gd.view(), in.view(), dx.view(), rows, cols);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace mixlab
