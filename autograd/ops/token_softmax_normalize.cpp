// External attention's memory weights (mixers.md §7) as one kernel each way, where masked_fill,
// softmax, a multiply by the "any valid token" mask and sum_normalize took four passes forward
// and as many backward. For logits Ãᵀ [B, ..., S, N] (slots, tokens):
//
//   forward:   P = softmax over the valid tokens of each slot's row (0 at invalid tokens, and
//              everywhere when an example has none),  D_n = eps + Σ_s P_sn,  W = P / D
//   backward:  P = W ∘ D,  dP = (dW − Σ_s dW ∘ W) / D,  dL = P ∘ (dP − Σ_n P ∘ dP)
//
// Only W (the output) and D ([items, tokens]) are kept for the backward: P is not stored.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor token_softmax_normalize(const Tensor& logits, const Tensor& valid, double eps) {
  const char* op = "token_softmax_normalize";
  check_same(op, {&logits});
  check(logits.dim() >= 3, op, ": logits must be [B, ..., slots, tokens], got ",
        shape_str(logits.shape()));
  const int64_t batch = logits.size(0), slots = logits.size(-2), tokens = logits.size(-1);
  const int64_t items = slots * tokens == 0 ? 0 : logits.numel() / (slots * tokens);
  if (valid.defined()) {
    check_same(op, {&logits, &valid});
    check(valid.dim() == 2 && valid.size(0) == batch && valid.size(1) == tokens, op,
          ": valid must be [batch, tokens] = [", batch, ", ", tokens, "] for logits ",
          shape_str(logits.shape()), ", got ", shape_str(valid.shape()));
  }
  const int64_t groups = batch == 0 ? 1 : items / batch;
  Tensor in = dense(logits);
  Tensor mask = valid.defined() ? dense(valid) : Tensor();
  Tensor weights = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  Tensor denom = Tensor::empty({items, tokens}, logits.dtype(), logits.device());
  if (logits.numel() > 0)
    backend_of(logits).token_softmax_normalize(in.view(), view_or_none(mask, logits.dtype()),
                                               weights.view(), denom.view(), items,
                                               std::max<int64_t>(groups, 1), slots, tokens, eps);
  return record(op, weights, {logits},
                [out = weights.detach(), denom, items, slots, tokens](const Tensor& g) {
                  Tensor gd = dense(g);
                  Tensor dx = Tensor::empty(out.shape(), out.dtype(), out.device());
                  if (out.numel() > 0)
                    backend_of(out).token_softmax_normalize_backward(
                        gd.view(), out.view(), denom.view(), dx.view(), items, slots, tokens);
                  return std::vector<Tensor>{dx};
                });
}

}  // namespace mixlab
