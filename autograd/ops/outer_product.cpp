// Batched outer products, out[..., u, v] = a[..., u] · b[..., v], as one kernel each way: the
// factorized dense synthesizer's logits A_k[i,u]·B_k[i,v]. The broadcast multiply it replaces
// walked its [.., p, 1] and [.., 1, q] operands a row of q (7 there) elements at a time, and its
// gradient took two more such multiplies and two reductions.
//
//   forward:   out[r, u, v] = a[r, u] b[r, v]
//   backward:  da[r, u] = Σ_v dout[r, u, v] b[r, v],   db[r, v] = Σ_u dout[r, u, v] a[r, u]
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor outer_product(const Tensor& a, const Tensor& b) {
  const char* op = "outer_product";
  check_same(op, {&a, &b});
  bool fits = a.dim() >= 1 && a.dim() == b.dim();
  for (int64_t i = 0; fits && i + 1 < a.dim(); ++i) fits = a.size(i) == b.size(i);
  check(fits, op, ": needs a [..., p] and b [..., q] with the same leading axes, got a ",
        shape_str(a.shape()), ", b ", shape_str(b.shape()));
  const int64_t p = a.size(-1), q = b.size(-1);
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < a.dim(); ++i) rows *= a.size(i);
  Shape shape = a.shape();
  shape.push_back(q);
  Tensor x = dense(a), y = dense(b);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  if (out.numel() > 0) backend_of(a).outer_product(x.view(), y.view(), out.view(), rows, p, q);
  return record(op, out, {a, b}, [x = x.detach(), y = y.detach(), rows, p, q](const Tensor& g) {
    Tensor gd = dense(g);
    Tensor da = Tensor::empty(x.shape(), x.dtype(), x.device());
    Tensor db = Tensor::empty(y.shape(), y.dtype(), y.device());
    if (rows > 0)
      backend_of(x).outer_product_backward(x.view(), y.view(), gd.view(), da.view(), db.view(),
                                           rows, p, q);
    return std::vector<Tensor>{da, db};
  });
}

}  // namespace mixlab
