// The attention core fused per (batch, head): one kernel for scores, scale, mask, softmax and the
// weighted sum (backends/cpu/cpu_attention.cpp), one for all three gradients. The forward keeps
// only the output and each row's log-sum-exp; the backward recomputes the probabilities.
//
// Layout: the kernels take views whose rows (axis 2) are strided, so the heads split out of a
// [B, N, H·D] projection reach them without a copy, and the output and the gradients are written
// in [B, N, H, ·] buffers seen as [B, H, N, ·]: merging or splitting heads around them is free.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

// Whether the kernels can read t as it is: unit stride along the last axis and rows at least a
// row apart (what cblas needs of a leading dimension).
bool rows_readable(const Tensor& t) {
  bool unit = t.size(3) <= 1 || t.strides()[3] == 1;
  bool rows = t.size(2) <= 1 || t.strides()[2] >= t.size(3);
  return unit && rows;
}
Tensor readable(const Tensor& t) {
  if (rows_readable(t)) return t;
  NoGradGuard no_grad;
  return contiguous(t);
}

// A [B, H, n, c] tensor stored as [B, n, H, c] (the heads-merged layout).
Tensor heads_major(int64_t b, int64_t h, int64_t n, int64_t c, const Tensor& like) {
  NoGradGuard no_grad;
  return transpose(Tensor::empty({b, n, h, c}, like.dtype(), like.device()), 1, 2);
}

void check_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed) {
  const char* op = "fused_attention";
  check_same(op, {&q, &k, &v});
  check(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
        ": needs q [B, H, N, D], k [B, H, M, D], v [B, H, M, E], got q ", shape_str(q.shape()),
        ", k ", shape_str(k.shape()), ", v ", shape_str(v.shape()));
  bool same_items = k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                    v.size(1) == q.size(1);
  check(same_items && k.size(3) == q.size(3) && v.size(2) == k.size(2), op,
        ": shapes do not fit q [B, H, N, D], k [B, H, M, D], v [B, H, M, E]: q ",
        shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ", shape_str(v.shape()));
  if (!allowed.defined()) return;
  check(allowed.device() == q.device(), op, ": the mask ", shape_str(allowed.shape()), " is on ",
        allowed.device().str(), ", q ", shape_str(q.shape()), " on ", q.device().str());
  Shape scores{q.size(0), q.size(1), q.size(2), k.size(2)};
  bool fits = allowed.dim() <= 4;
  for (int i = 0; fits && i < allowed.dim(); ++i) {
    int64_t size = allowed.shape()[i], want = scores[4 - allowed.dim() + i];
    fits = size == want || size == 1;
  }
  check(fits, op, ": the mask ", shape_str(allowed.shape()),
        " does not broadcast to the scores [B, H, N, M] = ", shape_str(scores));
}

}  // namespace

Tensor fused_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                       const Tensor& allowed, double scale) {
  check_shapes(q_in, k_in, v_in, allowed);
  Tensor q = readable(q_in), k = readable(k_in), v = readable(v_in);
  const int64_t b = q.size(0), h = q.size(1), n = q.size(2), d = q.size(3);
  const int64_t m = k.size(2), e = v.size(3);
  Tensor mask;
  if (allowed.defined()) {
    NoGradGuard no_grad;
    mask = allowed.dtype() == q.dtype() ? allowed.detach() : cast(allowed, q.dtype());
  }
  View mask_view;
  mask_view.dtype = q.dtype();
  if (mask.defined()) mask_view = broadcast_view(mask, {b, h, n, m});
  Tensor out = heads_major(b, h, n, e, q);
  Tensor lse = Tensor::empty({b, h, n}, q.dtype(), q.device());
  if (out.numel() > 0 || lse.numel() > 0)
    backend_of(q).attention(q.view(), k.view(), v.view(), mask_view, scale, out.view(), lse.view());
  return record("fused_attention", out, {q_in, k_in, v_in},
                [q = q.detach(), k = k.detach(), v = v.detach(), mask, mask_view, scale,
                 out = out.detach(), lse, d, e](const Tensor& grad) {
                  Tensor g = readable(grad);
                  int64_t b = q.size(0), h = q.size(1), n = q.size(2), m = k.size(2);
                  Tensor dq = heads_major(b, h, n, d, q);
                  Tensor dk = heads_major(b, h, m, d, q);
                  Tensor dv = heads_major(b, h, m, e, q);
                  if (b * h > 0)
                    backend_of(q).attention_backward(q.view(), k.view(), v.view(), mask_view, scale,
                                                     out.view(), lse.view(), g.view(), dq.view(),
                                                     dk.view(), dv.view());
                  return std::vector<Tensor>{dq, dk, dv};
                });
}

}  // namespace mixlab
