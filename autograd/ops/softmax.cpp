// softmax and log_softmax along an axis, numerically stable (max subtracted), with their fused
// backward kernels. Other axes are moved last and back (views; one copy when needed).
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

Tensor softmax_last(const Tensor& x, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  check_same(name, {&x});
  check(x.dim() >= 1, name, ": needs at least one dimension");
  Tensor in = dense(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  if (y.numel() > 0) backend_of(x).softmax(in.view(), y.view(), rows, cols, log);
  return record(name, y, {x}, [y = y.detach(), rows, cols, log](const Tensor& g) {
    Tensor gd = dense(g);
    Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
    if (dx.numel() > 0)
      backend_of(y).softmax_backward(y.view(), gd.view(), dx.view(), rows, cols, log);
    return std::vector<Tensor>{dx};
  });
}

Tensor along_axis(const Tensor& x, int64_t axis, bool log) {
  int a = normalize_axis(axis, x.dim(), log ? "log_softmax" : "softmax", x.shape());
  if (a == x.dim() - 1) return softmax_last(x, log);
  return transpose(softmax_last(transpose(x, a, -1), log), a, -1);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) { return along_axis(x, axis, false); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return along_axis(x, axis, true); }

}  // namespace mixlab
