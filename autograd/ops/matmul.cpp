// Matrix products on the backend's gemm. Operands that are transposed views go to the kernel
// as transpose flags, never as copies; a weight shared across a batch folds the batch into rows.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

// How a [rows, cols] matrix with the given strides can be read by gemm without a copy.
struct MatrixLayout {
  bool ok = false, transposed = false;
  int64_t ld = 0;
};

MatrixLayout layout_of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  MatrixLayout l;
  if ((col_stride == 1 || cols == 1) && (row_stride >= cols || rows == 1)) {
    l.ok = true;
    l.ld = rows == 1 ? std::max<int64_t>(cols, 1) : std::max<int64_t>(row_stride, 1);
  } else if ((row_stride == 1 || rows == 1) && (col_stride >= rows || cols == 1)) {
    l.ok = l.transposed = true;
    l.ld = cols == 1 ? std::max<int64_t>(rows, 1) : std::max<int64_t>(col_stride, 1);
  }
  return l;
}

// C[b] = A[b] @ B[b] for 3-D operands of one batch size (batch stride may be 0).
Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  int64_t batch = a.shape()[0], m = a.shape()[1], k = a.shape()[2], n = b.shape()[2];
  MatrixLayout la = layout_of(m, k, a.strides()[1], a.strides()[2]);
  MatrixLayout lb = layout_of(k, n, b.strides()[1], b.strides()[2]);
  if (!la.ok) a = dense(a), la = layout_of(m, k, a.strides()[1], a.strides()[2]);
  if (!lb.ok) b = dense(b), lb = layout_of(k, n, b.strides()[1], b.strides()[2]);
  Tensor c = Tensor::empty({batch, m, n}, a.dtype(), a.device());
  if (c.numel() == 0) return c;
  if (k == 0) {
    c.fill_(0.0);
    return c;
  }
  GemmArgs g;
  g.dtype = a.dtype();
  g.trans_a = la.transposed;
  g.trans_b = lb.transposed;
  g.m = m, g.n = n, g.k = k;
  g.a = a.raw_data(), g.lda = la.ld, g.stride_a = batch > 1 ? a.strides()[0] : 0;
  g.b = b.raw_data(), g.ldb = lb.ld, g.stride_b = batch > 1 ? b.strides()[0] : 0;
  g.c = c.raw_data(), g.ldc = n, g.stride_c = m * n;
  g.batch = batch;
  backend_of(a).gemm(g);
  return c;
}

Tensor bmm_recorded(const Tensor& a, const Tensor& b) {
  return record("matmul", bmm(a, b), {a, b}, [a, b](const Tensor& g) {
    Tensor ga = a.requires_grad() ? bmm_recorded(g, transpose(b, 1, 2)) : Tensor();
    Tensor gb = b.requires_grad() ? bmm_recorded(transpose(a, 1, 2), g) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_same("matmul", {&a, &b});
  if (a.dim() < 2 || b.dim() < 2)
    fail("matmul: ", shape_str(a.shape()), " x ", shape_str(b.shape()),
         ": both operands need at least 2 dimensions");
  int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  if (k != k2)
    fail("matmul: ", shape_str(a.shape()), " x ", shape_str(b.shape()), ": inner dimensions ", k,
         " and ", k2, " differ");
  if (b.dim() == 2) {
    // One matrix for the whole batch: fold the batch into rows, one large gemm.
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(n);
    Tensor a3 = unsqueeze(a.dim() == 2 ? a : reshape(a, {-1, k}), 0);
    Tensor c = bmm_recorded(a3, unsqueeze(b, 0));
    return reshape(c, out_shape);
  }
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  int64_t count = numel_of(batch);
  auto to3 = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    Tensor e = expand(t, full);
    if (e.dim() == 3) return e;
    // Collapse batch axes into one when their strides allow it, else copy.
    bool collapsible = true;
    for (int i = 0; i + 1 < static_cast<int>(batch.size()); ++i)
      collapsible = collapsible && e.strides()[i] == e.strides()[i + 1] * e.shape()[i + 1];
    if (collapsible && !batch.empty()) {
      int64_t bs = batch.empty() ? 0 : e.strides()[batch.size() - 1];
      Tensor v = make_view(e, {count, rows, cols},
                           {bs, e.strides()[e.dim() - 2], e.strides()[e.dim() - 1]}, e.offset());
      return record("reshape", v, {e}, [from = e.shape()](const Tensor& g) {
        return std::vector<Tensor>{reshape(g, from)};
      });
    }
    return reshape(e, {count, rows, cols});
  };
  Tensor c = bmm_recorded(to3(a, m, k), to3(b, k, n));
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  return reshape(c, out_shape);
}

}  // namespace mixlab
