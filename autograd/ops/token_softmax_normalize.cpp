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
//
// In place where nothing else can see it (the kernels read each element before they write it, on
// every backend): W over the logits when they come as an rvalue no other tensor shares (External
// attention's, 25 MB a block in the classifier, read by nothing after this op), and dL over dW
// when the rule is handed the only reference to it. Writing into memory just read saves
// fetching fresh lines before writing them: in the External classifier's step (2 threads,
// MIXLAB_DEBUG=1) the forward took 1.02-1.04 ms a call into fresh memory against 0.90-0.92 ms in
// place, the backward 0.88-0.92 ms against 0.68-0.70 ms.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

Tensor token_softmax_normalize_impl(const Tensor& logits, const Tensor& slot_bias,
                                    const Tensor& valid, double eps, bool over_logits) {
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
  Tensor weights = over_logits ? logits.detach()
                               : Tensor::empty(logits.shape(), logits.dtype(), logits.device());
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
        const bool over_gradient = g.writable_in_place();
        Tensor gd = dense(g);
        Tensor dx = over_gradient ? gd : Tensor::empty(out.shape(), out.dtype(), out.device());
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

}  // namespace

Tensor token_softmax_normalize(const Tensor& logits, const Tensor& slot_bias, const Tensor& valid,
                               double eps) {
  return token_softmax_normalize_impl(logits, slot_bias, valid, eps, false);
}

Tensor token_softmax_normalize(Tensor&& logits, const Tensor& slot_bias, const Tensor& valid,
                               double eps) {
  return token_softmax_normalize_impl(logits, slot_bias, valid, eps,
                                      logits.memory_unshared() && logits.is_contiguous());
}

}  // namespace mixlab
