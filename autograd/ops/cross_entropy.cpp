// Cross-entropy fused with log-softmax: one kernel computes each row's loss and log-sum-exp,
// one kernel turns the upstream gradient into dlogits = scale * (softmax - target).
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     double smoothing) {
  check_same("cross_entropy", {&logits});
  check(targets.dtype() == DType::I32, "cross_entropy: targets must be int32, got ",
        dtype_name(targets.dtype()));
  check(targets.device() == logits.device(), "cross_entropy: targets on ", targets.device().str(),
        ", logits on ", logits.device().str());
  check(smoothing >= 0.0 && smoothing < 1.0, "cross_entropy: label smoothing ", smoothing,
        " must be in [0, 1)");
  Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (logits.dim() < 1 || targets.shape() != expected)
    fail("cross_entropy: logits ", shape_str(logits.shape()), " need targets of shape ",
         shape_str(expected), ", got ", shape_str(targets.shape()));
  int64_t cols = logits.size(-1), rows = targets.numel();
  Tensor z = dense(logits), t = dense(targets);
  // Checked and counted where the targets are, so a GPU does not wait here (a bad target is
  // reported at its next wait; its row's loss is NaN meanwhile).
  const std::string why = "is out of range for " + std::to_string(cols) + " classes";
  backend_of(t).check_indices(t.view(), cols, ignore_index, "cross_entropy: target", why.c_str());
  Tensor loss_rows = Tensor::empty({rows}, logits.dtype(), logits.device());
  Tensor lse = Tensor::empty({rows}, logits.dtype(), logits.device());
  if (rows > 0)
    backend_of(z).cross_entropy(z.view(), t.view(), loss_rows.view(), lse.view(), rows, cols,
                                ignore_index, smoothing);
  // The number of counted rows, at least 1: with none, every row's loss and gradient is 0
  // already and the mean stays 0 (not NaN). In float64 where the device has it (exact counts).
  const DType wide = widest_float(z.device());
  auto constant = [&](double value) { return Tensor::full({}, value, wide, z.device()); };
  Tensor counted, loss;
  {
    NoGradGuard no_grad;
    Tensor ignored = sum(equal(cast(t, wide), constant(static_cast<double>(ignore_index))));
    counted = maximum(sub(constant(static_cast<double>(rows)), ignored), constant(1.0));
    // The mean: the sum times float(1 / counted), the product the host's 1.0 / counted gave.
    loss = mul(sum(loss_rows), cast(div(constant(1.0), counted), z.dtype()));
  }
  return record("cross_entropy", loss, {logits},
                [z, t, lse, rows, cols, counted, ignore_index, smoothing](const Tensor& g) {
                  // scale = upstream / counted for every row, formed where g lives: reading g back
                  // would stop a GPU in the middle of the backward pass. In float64 (where the
                  // device has it) and rounded once, as the host's double division was.
                  Tensor scale;
                  {
                    NoGradGuard no_grad;
                    Tensor per_row = div(cast(reshape(g, {}), counted.dtype()), counted);
                    scale = dense(expand(cast(per_row, z.dtype()), {rows}));
                  }
                  Tensor dz = Tensor::empty(z.shape(), z.dtype(), z.device());
                  if (rows > 0)
                    backend_of(z).cross_entropy_backward(z.view(), t.view(), lse.view(),
                                                         scale.view(), dz.view(), rows, cols,
                                                         ignore_index, smoothing);
                  return std::vector<Tensor>{dz};
                });
}

}  // namespace mixlab
