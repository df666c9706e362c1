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

// Whether t broadcasts to the [B, H, N, M] scores (each of its axes, aligned on the right, 1 or
// the scores' size).
bool broadcasts_to(const Tensor& t, const Shape& scores) {
  bool fits = t.dim() <= 4;
  for (int i = 0; fits && i < t.dim(); ++i) {
    int64_t size = t.shape()[i], want = scores[4 - t.dim() + i];
    fits = size == want || size == 1;
  }
  return fits;
}

// The mask (if any) is on `like`'s device and broadcasts to the [B, H, N, M] scores.
void check_mask(const char* op, const Tensor& allowed, const Shape& scores, const char* like_name,
                const Tensor& like) {
  if (!allowed.defined()) return;
  check(allowed.device() == like.device(), op, ": the mask ", shape_str(allowed.shape()), " is on ",
        allowed.device().str(), ", ", like_name, " ", shape_str(like.shape()), " on ",
        like.device().str());
  check(broadcasts_to(allowed, scores), op, ": the mask ", shape_str(allowed.shape()),
        " does not broadcast to the scores [B, H, N, M] = ", shape_str(scores));
}

void check_shapes(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& allowed) {
  check_same(op, {&q, &k, &v});
  check(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
        ": needs q [B, H, N, D], k [B, H, M, D], v [B, H, M, E], got q ", shape_str(q.shape()),
        ", k ", shape_str(k.shape()), ", v ", shape_str(v.shape()));
  bool same_items = k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                    v.size(1) == q.size(1);
  check(same_items && k.size(3) == q.size(3) && v.size(2) == k.size(2), op,
        ": shapes do not fit q [B, H, N, D], k [B, H, M, D], v [B, H, M, E]: q ",
        shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ", shape_str(v.shape()));
  check_mask(op, allowed, {q.size(0), q.size(1), q.size(2), k.size(2)}, "q", q);
}

// The bias (if any) is on q's device and dtype and broadcasts to the [B, H, N, M] scores.
void check_bias(const char* op, const Tensor& bias, const Shape& scores, const Tensor& q) {
  if (!bias.defined()) return;
  check(bias.device() == q.device() && bias.dtype() == q.dtype(), op, ": the bias ",
        shape_str(bias.shape()), " is ", dtype_name(bias.dtype()), " on ", bias.device().str(),
        ", q ", shape_str(q.shape()), " ", dtype_name(q.dtype()), " on ", q.device().str());
  check(broadcasts_to(bias, scores), op, ": the bias ", shape_str(bias.shape()),
        " does not broadcast to the scores [B, H, N, M] = ", shape_str(scores));
}

// The bias as the kernels read it: [B or 1, H or 1, N, M] with rows of unit stride (a bias
// broadcast along the queries or keys is expanded there and copied; the batch and head axes stay
// broadcast, stride 0 in the view).
Tensor readable_bias(const Tensor& bias, const Shape& scores) {
  NoGradGuard no_grad;
  Tensor b = bias;
  while (b.dim() < 4) b = unsqueeze(b, 0);
  b = expand(b, {b.size(0), b.size(1), scores[2], scores[3]});
  return rows_readable(b) ? b : contiguous(b);
}

// What the backward needs of a forward: the operands as the kernel read them, the mask, the
// bias, the output and each row's log-sum-exp.
struct Saved {
  Tensor q, k, v, mask, bias;
  View mask_view, bias_view;
  double scale;
  Tensor out, lse;
};

// The forward kernel on readable q, k, v: result [B, H, N, E] (a view of a [B, N, H, E] buffer).
// The result will carry the op's graph node; what is saved for its closure keeps a detached
// handle of it (the same handle would be a cycle, node -> closure -> tensor -> node, never freed).
Saved attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed,
                        const Tensor& bias, double scale, Tensor& result) {
  const int64_t b = q.size(0), h = q.size(1), n = q.size(2), m = k.size(2), e = v.size(3);
  Saved s{q.detach(), k.detach(), v.detach(), Tensor(), Tensor(),
          View(),     View(),     scale,      Tensor(), Tensor()};
  if (allowed.defined()) {
    NoGradGuard no_grad;
    s.mask = allowed.dtype() == q.dtype() ? allowed.detach() : cast(allowed, q.dtype());
  }
  s.mask_view.dtype = s.bias_view.dtype = q.dtype();
  if (s.mask.defined()) s.mask_view = broadcast_view(s.mask, {b, h, n, m});
  if (bias.defined()) {
    s.bias = readable_bias(bias.detach(), {b, h, n, m});
    s.bias_view = broadcast_view(s.bias, {b, h, n, m});
  }
  s.out = heads_major(b, h, n, e, q);
  s.lse = Tensor::empty({b, h, n}, q.dtype(), q.device());
  if (s.out.numel() > 0 || s.lse.numel() > 0)
    backend_of(q).attention(q.view(), k.view(), v.view(), s.mask_view, s.bias_view, scale,
                            s.out.view(), s.lse.view());
  result = s.out;
  s.out = result.detach();
  return s;
}

// Whether the caller's bias needs a gradient, its shape, and whether it is a heads view of a
// [B, N, H, M] buffer (the dense synthesizers' per-token logits): its gradient is then written in
// that layout, which their producer's backward reads without a copy.
struct BiasGrad {
  bool wanted = false;
  Shape shape;
  bool heads_view = false;
};
BiasGrad bias_grad_of(const Tensor& bias) {
  if (!bias.defined() || !bias.requires_grad()) return {};
  const Shape& z = bias.shape();
  const bool heads_view = bias.dim() == 4 && bias.strides()[3] == 1 && bias.strides()[1] == z[3] &&
                          bias.strides()[2] == z[1] * z[3] &&
                          bias.strides()[0] == z[2] * z[1] * z[3];
  return {true, z, heads_view};
}

// The backward kernel: writes every element of dq, dk and dv (shaped and strided like q, k, v);
// returns the bias's gradient in the bias's own shape where one is wanted.
Tensor attention_backward(const Saved& s, const Tensor& grad, const Tensor& dq, const Tensor& dk,
                          const Tensor& dv, const BiasGrad& wanted) {
  Tensor g = readable(grad);
  const int64_t b = s.q.size(0), h = s.q.size(1), n = s.q.size(2), m = s.k.size(2);
  const bool bias_grad = wanted.wanted;
  Tensor dbias = !bias_grad          ? Tensor()
                 : wanted.heads_view ? heads_major(b, h, n, m, s.q)
                                     : Tensor::empty({b, h, n, m}, s.q.dtype(), s.q.device());
  View dbias_view;
  dbias_view.dtype = s.q.dtype();
  if (bias_grad) dbias_view = dbias.view();
  if (b * h > 0)
    backend_of(s.q).attention_backward(s.q.view(), s.k.view(), s.v.view(), s.mask_view, s.bias_view,
                                       s.scale, s.out.view(), s.lse.view(), g.view(), dq.view(),
                                       dk.view(), dv.view(), dbias_view);
  if (!bias_grad) return Tensor();
  NoGradGuard no_grad;
  return sum_to(dbias, wanted.shape);  // the blocks of a broadcast bias summed
}

}  // namespace

Tensor fused_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                       const Tensor& allowed, double scale, const Tensor& bias) {
  const char* op = "fused_attention";
  check_shapes(op, q_in, k_in, v_in, allowed);
  check_bias(op, bias, {q_in.size(0), q_in.size(1), q_in.size(2), k_in.size(2)}, q_in);
  Tensor out;
  Saved s =
      attention_forward(readable(q_in), readable(k_in), readable(v_in), allowed, bias, scale, out);
  std::vector<Tensor> inputs{q_in, k_in, v_in};
  if (bias.defined()) inputs.push_back(bias);
  return record(op, out, std::move(inputs),
                [s = std::move(s), has_bias = bias.defined(),
                 bias_grad = bias_grad_of(bias)](const Tensor& grad) {
                  const int64_t b = s.q.size(0), h = s.q.size(1), n = s.q.size(2), m = s.k.size(2);
                  Tensor dq = heads_major(b, h, n, s.q.size(3), s.q);
                  Tensor dk = heads_major(b, h, m, s.k.size(3), s.q);
                  Tensor dv = heads_major(b, h, m, s.v.size(3), s.q);
                  Tensor dbias = attention_backward(s, grad, dq, dk, dv, bias_grad);
                  std::vector<Tensor> grads{dq, dk, dv};
                  if (has_bias) grads.push_back(dbias);
                  return grads;
                });
}

Tensor fused_self_attention(const Tensor& qkv_in, int64_t heads, const Tensor& allowed,
                            double scale, const Tensor& bias) {
  const char* op = "fused_self_attention";
  check(qkv_in.dim() == 3 && heads > 0 && qkv_in.size(2) % (3 * heads) == 0, op,
        ": needs qkv [B, N, 3·H·D] and H > 0 heads, got qkv ", shape_str(qkv_in.shape()), " and ",
        heads, " heads");
  Tensor qkv = qkv_in.is_contiguous() ? qkv_in : [&] {
    NoGradGuard no_grad;
    return contiguous(qkv_in);
  }();
  const int64_t b = qkv.size(0), n = qkv.size(1), width = qkv.size(2), d = width / 3;
  // Head j of part p (q, k, v) of row t is qkv[., t, p·d + j·D, .]: [B, H, N, D] views.
  const Shape shape{b, heads, n, d / heads}, strides{n * width, d / heads, width, 1};
  auto part = [shape, strides, d](const Tensor& t, int p) {
    return make_view(t, shape, strides, t.offset() + p * d);
  };
  check_shapes(op, part(qkv, 0), part(qkv, 1), part(qkv, 2), allowed);
  check_bias(op, bias, {b, heads, n, n}, qkv_in);
  Tensor out;
  Saved s = attention_forward(part(qkv, 0), part(qkv, 1), part(qkv, 2), allowed, bias, scale, out);
  std::vector<Tensor> inputs{qkv_in};
  if (bias.defined()) inputs.push_back(bias);
  return record(op, out, std::move(inputs),
                [s = std::move(s), part, b, n, width, has_bias = bias.defined(),
                 bias_grad = bias_grad_of(bias)](const Tensor& grad) {
                  Tensor dqkv = Tensor::empty({b, n, width}, s.q.dtype(), s.q.device());
                  Tensor dbias = attention_backward(s, grad, part(dqkv, 0), part(dqkv, 1),
                                                    part(dqkv, 2), bias_grad);
                  std::vector<Tensor> grads{dqkv};
                  if (has_bias) grads.push_back(dbias);
                  return grads;
                });
}

Tensor fused_self_attention_groups(const Tensor& qkv_in, int64_t heads,
                                   const std::vector<SequenceGroup>& groups, bool causal,
                                   double scale) {
  const char* op = "fused_self_attention_groups";
  check(qkv_in.dim() == 2 && heads > 0 && qkv_in.size(1) % (3 * heads) == 0, op,
        ": needs qkv [R, 3·H·D] and H > 0 heads, got qkv ", shape_str(qkv_in.shape()), " and ",
        heads, " heads");
  check(is_floating(qkv_in.dtype()), op, ": expects a floating qkv, got ",
        dtype_name(qkv_in.dtype()));
  int64_t rows = 0;
  for (const SequenceGroup& g : groups) {
    check(g.count >= 0 && g.length >= 0, op, ": a group of ", g.count, " sequences of length ",
          g.length);
    rows += g.count * g.length;
  }
  check(rows == qkv_in.size(0), op, ": the groups hold ", rows, " rows, qkv ",
        shape_str(qkv_in.shape()), " has ", qkv_in.size(0));
  Tensor qkv = qkv_in.is_contiguous() ? qkv_in : [&] {
    NoGradGuard no_grad;
    return contiguous(qkv_in);
  }();
  const int64_t width = qkv.size(1), d = width / 3, depth = d / heads;
  const DType dtype = qkv.dtype();
  Backend& backend = backend_of(qkv);
  // Group g's part p (q, k, v), its output and its gradient as [count, H, length, D] views: the
  // same geometry fused_self_attention gives a [count, length, 3·H·D] batch.
  struct Part {
    int64_t start, count, length;
    Tensor mask;  // causal: [length, length] lower triangle
  };
  std::vector<Part> parts;
  int64_t start = 0;
  for (const SequenceGroup& g : groups) {
    if (g.count > 0 && g.length > 0) {
      Tensor mask;
      if (causal) {
        NoGradGuard no_grad;
        mask = tril_mask(g.length, g.length, 0, dtype, qkv.device());
      }
      parts.push_back({start, g.count, g.length, mask});
    }
    start += g.count * g.length;
  }
  auto rows_view = [heads, depth](const Tensor& t, const Part& part, int64_t column) {
    const int64_t w = t.size(1);
    return make_view(t, {part.count, heads, part.length, depth}, {part.length * w, depth, w, 1},
                     t.offset() + part.start * w + column);
  };
  auto lse_view = [heads](const Tensor& lse, const Part& part) {
    return make_view(lse, {part.count, heads, part.length}, {heads * part.length, part.length, 1},
                     lse.offset() + part.start * heads);
  };
  auto mask_view = [heads, dtype](const Part& part) {
    return part.mask.defined()
               ? broadcast_view(part.mask, {part.count, heads, part.length, part.length})
               : no_view(dtype);
  };
  Tensor out = Tensor::empty({rows, d}, dtype, qkv.device());
  Tensor lse = Tensor::empty({rows * heads}, dtype, qkv.device());
  for (const Part& part : parts)
    backend.attention(rows_view(qkv, part, 0).view(), rows_view(qkv, part, d).view(),
                      rows_view(qkv, part, 2 * d).view(), mask_view(part), no_view(dtype), scale,
                      rows_view(out, part, 0).view(), lse_view(lse, part).view());
  Tensor saved_qkv = qkv.detach(), saved_out = out.detach();
  return record(op, out, {qkv_in},
                [saved_qkv, saved_out, lse, parts, rows_view, lse_view, mask_view, scale, rows,
                 width, dtype](const Tensor& grad) {
                  Tensor g = grad.is_contiguous() ? grad : [&] {
                    NoGradGuard no_grad;
                    return contiguous(grad);
                  }();
                  Tensor dqkv = Tensor::empty({rows, width}, dtype, g.device());
                  const int64_t d = width / 3;
                  for (const Part& part : parts)
                    backend_of(g).attention_backward(
                        rows_view(saved_qkv, part, 0).view(), rows_view(saved_qkv, part, d).view(),
                        rows_view(saved_qkv, part, 2 * d).view(), mask_view(part), no_view(dtype),
                        scale, rows_view(saved_out, part, 0).view(), lse_view(lse, part).view(),
                        rows_view(g, part, 0).view(), rows_view(dqkv, part, 0).view(),
                        rows_view(dqkv, part, d).view(), rows_view(dqkv, part, 2 * d).view(),
                        no_view(dtype));
                  return std::vector<Tensor>{dqkv};
                });
}

Tensor fused_attention_groups(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                              int64_t heads, const std::vector<CrossGroup>& groups, double scale) {
  const char* op = "fused_attention_groups";
  check_same(op, {&q_in, &k_in, &v_in});
  check(q_in.dim() == 2 && k_in.dim() == 2 && v_in.dim() == 2 && heads > 0 &&
            q_in.size(1) % heads == 0 && v_in.size(1) % heads == 0 &&
            k_in.size(1) == q_in.size(1) && v_in.size(0) == k_in.size(0),
        op, ": needs q [Rq, H·D], k [Rk, H·D], v [Rk, H·E] and H > 0 heads, got q ",
        shape_str(q_in.shape()), ", k ", shape_str(k_in.shape()), ", v ", shape_str(v_in.shape()),
        " and ", heads, " heads");
  int64_t q_rows = 0, k_rows = 0;
  bool empty_side = false;  // a group with queries and no keys, or keys and no queries
  for (const CrossGroup& g : groups) {
    check(g.count >= 0 && g.query_length >= 0 && g.key_length >= 0, op, ": a group of ", g.count,
          " sequences of ", g.query_length, " queries and ", g.key_length, " keys");
    q_rows += g.count * g.query_length;
    k_rows += g.count * g.key_length;
    empty_side = empty_side || (g.count > 0 && (g.query_length == 0) != (g.key_length == 0));
  }
  check(q_rows == q_in.size(0) && k_rows == k_in.size(0), op, ": the groups hold ", q_rows,
        " query rows and ", k_rows, " key rows, q ", shape_str(q_in.shape()), " and k ",
        shape_str(k_in.shape()));
  auto dense2 = [](const Tensor& t) {
    if (t.is_contiguous()) return t;
    NoGradGuard no_grad;
    return contiguous(t);
  };
  Tensor q = dense2(q_in), k = dense2(k_in), v = dense2(v_in);
  const DType dtype = q.dtype();
  const int64_t d = q.size(1) / heads, e = v.size(1) / heads;
  struct Part {
    int64_t q_start, k_start, count, n, m;
  };
  std::vector<Part> parts;
  int64_t q_at = 0, k_at = 0;
  for (const CrossGroup& g : groups) {
    if (g.count > 0 && g.query_length > 0 && g.key_length > 0)
      parts.push_back({q_at, k_at, g.count, g.query_length, g.key_length});
    q_at += g.count * g.query_length;
    k_at += g.count * g.key_length;
  }
  // Rows [start, start + count·length) of t as [count, H, length, depth].
  auto rows_view = [heads](const Tensor& t, int64_t start, int64_t count, int64_t length,
                           int64_t depth) {
    const int64_t w = t.size(1);
    return make_view(t, {count, heads, length, depth}, {length * w, depth, w, 1},
                     t.offset() + start * w);
  };
  Tensor out = Tensor::empty({q_rows, heads * e}, dtype, q.device());
  Tensor lse = Tensor::empty({q_rows * heads}, dtype, q.device());
  if (empty_side) out.fill_(0.0);  // queries without keys get 0; no kernel sees them
  auto lse_view = [heads](const Tensor& l, const Part& p) {
    return make_view(l, {p.count, heads, p.n}, {heads * p.n, p.n, 1},
                     l.offset() + p.q_start * heads);
  };
  for (const Part& p : parts)
    backend_of(q).attention(
        rows_view(q, p.q_start, p.count, p.n, d).view(),
        rows_view(k, p.k_start, p.count, p.m, d).view(),
        rows_view(v, p.k_start, p.count, p.m, e).view(), no_view(dtype), no_view(dtype), scale,
        rows_view(out, p.q_start, p.count, p.n, e).view(), lse_view(lse, p).view());
  Tensor sq = q.detach(), sk = k.detach(), sv = v.detach(), so = out.detach();
  return record(op, out, {q_in, k_in, v_in},
                [sq, sk, sv, so, lse, parts, rows_view, lse_view, scale, d, e, dtype,
                 empty_side](const Tensor& grad) {
                  Tensor g = grad;
                  if (!g.is_contiguous()) {
                    NoGradGuard no_grad;
                    g = contiguous(grad);
                  }
                  Tensor dq = Tensor::empty(sq.shape(), dtype, g.device());
                  Tensor dk = Tensor::empty(sk.shape(), dtype, g.device());
                  Tensor dv = Tensor::empty(sv.shape(), dtype, g.device());
                  if (empty_side) {  // rows no kernel writes: their gradients are 0
                    dq.fill_(0.0);
                    dk.fill_(0.0);
                    dv.fill_(0.0);
                  }
                  for (const Part& p : parts)
                    backend_of(g).attention_backward(
                        rows_view(sq, p.q_start, p.count, p.n, d).view(),
                        rows_view(sk, p.k_start, p.count, p.m, d).view(),
                        rows_view(sv, p.k_start, p.count, p.m, e).view(), no_view(dtype),
                        no_view(dtype), scale, rows_view(so, p.q_start, p.count, p.n, e).view(),
                        lse_view(lse, p).view(), rows_view(g, p.q_start, p.count, p.n, e).view(),
                        rows_view(dq, p.q_start, p.count, p.n, d).view(),
                        rows_view(dk, p.k_start, p.count, p.m, d).view(),
                        rows_view(dv, p.k_start, p.count, p.m, e).view(), no_view(dtype));
                  return std::vector<Tensor>{dq, dk, dv};
                });
}

// ---- the synthesizers' core: softmax(L + M) v with the logits L given ----

Tensor fused_synthesized_attention(const Tensor& logits_in, const Tensor& v_in,
                                   const Tensor& allowed) {
  const char* op = "fused_synthesized_attention";
  check_same(op, {&logits_in, &v_in});
  check(logits_in.dim() == 4 && v_in.dim() == 4, op,
        ": needs logits [B or 1, H, N, M] and v [B, H, M, E], got logits ",
        shape_str(logits_in.shape()), ", v ", shape_str(v_in.shape()));
  const int64_t b = v_in.size(0), h = v_in.size(1), m = v_in.size(2), e = v_in.size(3);
  const int64_t n = logits_in.size(2);
  bool fits = (logits_in.size(0) == b || logits_in.size(0) == 1) && logits_in.size(1) == h &&
              logits_in.size(3) == m;
  check(fits, op, ": shapes do not fit logits [B or 1, H, N, M], v [B, H, M, E]: logits ",
        shape_str(logits_in.shape()), ", v ", shape_str(v_in.shape()));
  check_mask(op, allowed, {b, h, n, m}, "v", v_in);
  Tensor logits = readable(logits_in), v = readable(v_in);
  const bool shared = logits.size(0) != b;  // one block of logits for the whole batch
  // Logits that are a heads view of [B, N, H, M] (dense synthesizers' per-token projections) get
  // their gradient in that layout, which their producer's backward reads without a copy.
  const bool heads_view = !shared && logits.strides()[1] == m && logits.strides()[2] == h * m &&
                          logits.strides()[0] == n * h * m;
  Tensor mask;
  View mask_view;
  mask_view.dtype = v.dtype();
  if (allowed.defined()) {
    NoGradGuard no_grad;
    mask = allowed.dtype() == v.dtype() ? allowed.detach() : cast(allowed, v.dtype());
    mask_view = broadcast_view(mask, {b, h, n, m});
  }
  Tensor out = heads_major(b, h, n, e, v);
  Tensor lse = Tensor::empty({b, h, n}, v.dtype(), v.device());
  const View logits_view = broadcast_view(logits, {b, h, n, m});
  if (out.numel() > 0 || lse.numel() > 0)
    backend_of(v).synthesized_attention(logits_view, v.view(), mask_view, out.view(), lse.view());
  // Detached handles for the closure (the result itself would be a cycle through its node).
  return record(op, out, {logits_in, v_in},
                [logits = logits.detach(), v = v.detach(), mask, mask_view, logits_view,
                 out = out.detach(), lse, shared, heads_view](const Tensor& grad) {
                  const int64_t b = v.size(0), h = v.size(1), n = logits.size(2);
                  const int64_t m = v.size(2), e = v.size(3);
                  Tensor g = readable(grad);
                  Tensor dlogits = heads_view ? heads_major(b, h, n, m, v)
                                              : Tensor::empty({b, h, n, m}, v.dtype(), v.device());
                  Tensor dv = heads_major(b, h, m, e, v);
                  if (b * h > 0)
                    backend_of(v).synthesized_attention_backward(logits_view, v.view(), mask_view,
                                                                 out.view(), lse.view(), g.view(),
                                                                 dlogits.view(), dv.view());
                  if (shared) {
                    NoGradGuard no_grad;
                    dlogits = sum(dlogits, {0}, true);
                  }
                  return std::vector<Tensor>{dlogits, dv};
                });
}

// ---- linear attention's core: (φ(Q) φ(K)ᵀ V) / (φ(Q) Σ φ(K) + ε) per (batch, head) ----

Tensor fused_linear_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                              double eps) {
  const char* op = "fused_linear_attention";
  check_shapes(op, q_in, k_in, v_in, Tensor());
  Tensor q = readable(q_in), k = readable(k_in), v = readable(v_in);
  const int64_t b = q.size(0), h = q.size(1), n = q.size(2), e = v.size(3);
  Tensor out = heads_major(b, h, n, e, q);
  if (out.numel() > 0)
    backend_of(q).linear_attention(q.view(), k.view(), v.view(), eps, out.view());
  // Detached handles for the closure (the result itself would be a cycle through its node).
  return record(op, out, {q_in, k_in, v_in},
                [q = q.detach(), k = k.detach(), v = v.detach(), out = out.detach(),
                 eps](const Tensor& grad) {
                  const int64_t b = q.size(0), h = q.size(1), n = q.size(2), m = k.size(2);
                  Tensor g = readable(grad);
                  Tensor dq = heads_major(b, h, n, q.size(3), q);
                  Tensor dk = heads_major(b, h, m, k.size(3), q);
                  Tensor dv = heads_major(b, h, m, v.size(3), q);
                  if (b * h > 0)
                    backend_of(q).linear_attention_backward(q.view(), k.view(), v.view(), eps,
                                                            out.view(), g.view(), dq.view(),
                                                            dk.view(), dv.view());
                  return std::vector<Tensor>{dq, dk, dv};
                });
}

}  // namespace mixlab
