// External attention's memory weights (mixers.md §7) as one kernel each way, where masked_fill,
// softmax, a multiply by the "any valid token" mask and sum_normalize took four passes forward
// and as many backward. For logits Ã [B, N, ..., S] (tokens on axis 1, slots last, heads
// between) and an optional bias b [S] added to every token's row (M_k's):
//
//   forward:   P = softmax over the valid tokens (axis 1) of L + b, per slot (0 at invalid
//              tokens, and everywhere when an example has none),  D = eps + Σ_s P,  W = P / D
//   backward:  P = W ∘ D,  dP = (dW − Σ_s dW ∘ W) / D,  dL = P ∘ (dP − Σ_n P ∘ dP),
//              db_s = Σ_(b, n, heads) dL_s
//
// b is constant along the softmax's axis, so it cancels: the kernel never adds it (a pass and its
// gradient's reduction saved) and its gradient, zero but for rounding, is the sums of dL.
// Only W (the output) and D ([B, N, heads]) are kept for the backward: P is not stored.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor token_softmax_normalize(const Tensor& logits, const Tensor& slot_bias, const Tensor& valid,
                               double eps) {
  const char* op = "token_softmax_normalize";
  check_same(op, {&logits});
  check(logits.dim() >= 3, op, ": logits must be [B, tokens, ..., slots], got ",
        shape_str(logits.shape()));
  const int64_t batch = logits.size(0), tokens = logits.size(1), slots = logits.size(-1);
  const int64_t rows = batch * tokens * slots;
  const int64_t groups = rows == 0 ? 0 : logits.numel() / rows;
  if (slot_bias.defined()) {
    check_same(op, {&logits, &slot_bias});
    check(slot_bias.dim() == 1 && slot_bias.size(0) == slots, op, ": slot_bias must be [slots] = [",
          slots, "] for logits ", shape_str(logits.shape()), ", got ",
          shape_str(slot_bias.shape()));
  }
  if (valid.defined()) {
    check_same(op, {&logits, &valid});
    check(valid.dim() == 2 && valid.size(0) == batch && valid.size(1) == tokens, op,
          ": valid must be [batch, tokens] = [", batch, ", ", tokens, "] for logits ",
          shape_str(logits.shape()), ", got ", shape_str(valid.shape()));
  }
  Tensor in = dense(logits);
  Tensor mask = valid.defined() ? dense(valid) : Tensor();
  Tensor weights = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  Tensor denom = Tensor::empty({batch, tokens, groups}, logits.dtype(), logits.device());
  if (logits.numel() > 0)
    backend_of(logits).token_softmax_normalize(in.view(), view_or_none(mask, logits.dtype()),
                                               weights.view(), denom.view(), batch, tokens, groups,
                                               slots, eps);
  std::vector<Tensor> inputs{logits};
  if (slot_bias.defined()) inputs.push_back(slot_bias);
  const bool with_bias = slot_bias.defined();
  return record(
      op, weights, inputs,
      [out = weights.detach(), denom, batch, tokens, groups, slots, with_bias](const Tensor& g) {
        Tensor gd = dense(g);
        Tensor dx = Tensor::empty(out.shape(), out.dtype(), out.device());
        // Written whole by the kernel; zeros only when there is nothing to run.
        Tensor sums;
        if (with_bias)
          sums = out.numel() > 0
                     ? Tensor::empty({batch * groups, slots}, out.dtype(), out.device())
                     : Tensor::zeros({batch * groups, slots}, out.dtype(), out.device());
        if (out.numel() > 0)
          backend_of(out).token_softmax_normalize_backward(
              gd.view(), out.view(), denom.view(), dx.view(), view_or_none(sums, out.dtype()),
              batch, tokens, groups, slots);
        if (!with_bias) return std::vector<Tensor>{dx};
        return std::vector<Tensor>{dx, sum(sums, {0})};
      });
}

}  // namespace mixlab
