// Matrix products on the backend's gemm. Operands that are transposed views go to the kernel
// as transpose flags, never as copies; a weight shared across a batch folds the batch into rows.
#include <algorithm>
#include <utility>
#include <vector>

#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

// Whether strides lay a 4-D [outer, inner, rows, cols] tensor out densely (no gaps, no
// overlaps) in some axis order, with unit stride on its rows or on its columns: a layout gemm
// can write a product into.
bool gemm_writable(const Shape& shape, const Shape& strides) {
  std::vector<int> order;
  return dense_axis_order(shape, strides, order) &&
         (shape[2] == 1 || shape[3] == 1 || strides[3] == 1 || strides[2] == 1);
}

// Dense strides for `shape` with its axes in the order of `like`'s strides (largest first), or
// nothing when some axis of `like` has size 1 or is broadcast (its stride says nothing about
// the order).
Shape strides_in_order_of(const Tensor& like, const Shape& shape) {
  std::vector<int> order{0, 1, 2, 3};
  for (int i = 0; i < 4; ++i)
    if (like.shape()[i] == 1 || like.strides()[i] == 0) return {};
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return like.strides()[x] > like.strides()[y]; });
  Shape strides(4);
  int64_t step = 1;
  for (int i = 3; i >= 0; --i) strides[order[i]] = step, step *= shape[order[i]];
  return strides;
}

// C[o, i] = A[o, i] @ B[o, i] for 4-D operands [outer, inner, rows, cols] on one batch grid. Each
// batch axis has its own stride (0 broadcasts), so a head-split view [batch, heads, N, d_h] of
// a [batch, N, heads·d_h] projection is read in place (GemmArgs::inner). An operand with one
// outer item is shared by all of them (a synthesizer's weights, the same for every example).
//
// `c_strides`, when given, are the strides C is written with if gemm can write them
// (gemm_writable), else C is contiguous. A product of head-split operands written in their
// layout goes back through the split (merge_heads, or the split's backward) as views, where a
// contiguous one would be copied.
//
// sum_outer: C [1, inner, m, n] = Σ_o A[o, i] @ B[o, i] (gemm_sums_outer), the gradient of a
// shared operand, summed as the products are made.
Tensor bmm(const Tensor& a_in, const Tensor& b_in, const Shape& c_strides = {},
           bool sum_outer = false) {
  Tensor a = a_in, b = b_in;
  int64_t outer = std::max(a.shape()[0], b.shape()[0]), inner = a.shape()[1];
  int64_t m = a.shape()[2], k = a.shape()[3], n = b.shape()[3];
  MatrixLayout la = layout_of(m, k, a.strides()[2], a.strides()[3]);
  MatrixLayout lb = layout_of(k, n, b.strides()[2], b.strides()[3]);
  if (!la.ok) a = dense(a), la = layout_of(m, k, a.strides()[2], a.strides()[3]);
  if (!lb.ok) b = dense(b), lb = layout_of(k, n, b.strides()[2], b.strides()[3]);
  Shape shape{sum_outer ? 1 : outer, inner, m, n};
  Tensor c;
  if (!c_strides.empty() && c_strides != contiguous_strides(shape) &&
      gemm_writable(shape, c_strides))
    c = make_view(Tensor::empty({outer * inner * m * n}, a.dtype(), a.device()), shape, c_strides,
                  0);
  else
    c = Tensor::empty(shape, a.dtype(), a.device());
  if (c.numel() == 0) return c;
  if (k == 0) {
    c.fill_(0.0);
    return c;
  }
  // A size-1 axis never steps, so its stride is 0 (a view may carry any stride there).
  auto step = [](const Tensor& t, int axis) { return t.shape()[axis] > 1 ? t.strides()[axis] : 0; };
  GemmArgs g;
  g.dtype = a.dtype();
  g.m = m, g.n = n, g.k = k;
  g.trans_a = la.transposed, g.a = a.raw_data(), g.lda = la.ld;
  g.stride_a = step(a, 1), g.outer_stride_a = step(a, 0);
  g.trans_b = lb.transposed, g.b = b.raw_data(), g.ldb = lb.ld;
  g.stride_b = step(b, 1), g.outer_stride_b = step(b, 0);
  g.c = c.raw_data(), g.stride_c = step(c, 1), g.outer_stride_c = step(c, 0);
  bool c_by_rows = n == 1 || c.strides()[3] == 1;
  g.ldc = c_by_rows ? (m == 1 ? n : c.strides()[2]) : (n == 1 ? m : c.strides()[3]);
  if (!c_by_rows) {
    // C is stored by columns: write Cᵀ = op(B)ᵀ op(A)ᵀ by rows instead.
    std::swap(g.m, g.n);
    std::swap(g.a, g.b), std::swap(g.lda, g.ldb);
    std::swap(g.stride_a, g.stride_b), std::swap(g.outer_stride_a, g.outer_stride_b);
    g.trans_a = !lb.transposed, g.trans_b = !la.transposed;
  }
  g.batch = outer * inner;
  g.inner = inner;
  backend_of(a).gemm(g);
  return c;
}

Tensor bmm_recorded(const Tensor& a, const Tensor& b, const Shape& c_strides = {},
                    bool sum_outer = false);

// The gradient x @ y of an operand `like`: summed over the outer level when `like` is shared
// (one outer item against more), else written in like's layout (see bmm).
Tensor operand_gradient(const Tensor& x, const Tensor& y, const Tensor& like) {
  const bool shared = like.shape()[0] == 1 && std::max(x.shape()[0], y.shape()[0]) > 1;
  return shared ? bmm_recorded(x, y, {}, true) : bmm_recorded(x, y, like.strides());
}

Tensor bmm_recorded(const Tensor& a, const Tensor& b, const Shape& c_strides, bool sum_outer) {
  // (A summed product's gradient g has one outer item: shared by every product it summed.)
  return record("matmul", bmm(a, b, c_strides, sum_outer), {a, b}, [a, b](const Tensor& g) {
    Tensor ga = a.requires_grad() ? operand_gradient(g, transpose(b, 2, 3), a) : Tensor();
    Tensor gb = b.requires_grad() ? operand_gradient(transpose(a, 2, 3), g, b) : Tensor();
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
    Tensor a2 = a.dim() == 2 ? a : reshape(a, {-1, k});
    Tensor c = bmm_recorded(unsqueeze(unsqueeze(a2, 0), 0), unsqueeze(unsqueeze(b, 0), 0));
    return reshape(c, out_shape);
  }
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  if (batch.size() == 1 && batch[0] > 1 && (batch_a != batch || batch_b != batch)) {
    // One batch axis, one operand the same for every item (a weight applied to each example):
    // as [batch, 1] the batch is the outer level, where the shared operand's gradient is summed
    // by the products (bmm's sum_outer) instead of written per item and reduced.
    Tensor c = matmul(unsqueeze(a, -3), unsqueeze(b, -3));
    return reshape(c, {batch[0], m, n});
  }
  int64_t count = numel_of(batch);
  int nb = static_cast<int>(batch.size());
  int64_t inner = batch.back(), outer = count / std::max<int64_t>(inner, 1);
  // The operand as a [outer, inner, rows, cols] grid: the last batch axis is the inner level,
  // the ones before it collapse into the outer level when their strides allow (else a copy).
  // An operand with size 1 on every outer axis stays [1, inner, rows, cols]: shared by every
  // outer item, its gradient summed by the products (bmm's sum_outer) rather than expanded.
  auto to_grid = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    const int skipped = nb - (t.dim() - 2);  // leading batch axes t does not have
    bool shared = outer > 1;
    for (int i = 0; i < nb - 1; ++i) shared = shared && (i < skipped || t.size(i - skipped) == 1);
    const int64_t grid_outer = shared ? 1 : outer;
    if (shared)
      for (int i = 0; i < nb - 1; ++i) full[i] = 1;
    Tensor e = expand(t, full);
    // Outer axes of size 1 never step; the others must nest: each one's stride is the next
    // one's stride times its size.
    int64_t outer_stride = 0, nested = -1;
    for (int i = nb - 2; i >= 0; --i) {
      if (e.shape()[i] == 1) continue;
      if (nested < 0)
        outer_stride = e.strides()[i];
      else if (e.strides()[i] != nested)
        return reshape(e, {grid_outer, inner, rows, cols});  // not one stride: a copy
      nested = e.strides()[i] * e.shape()[i];
    }
    Tensor v = make_view(e, {grid_outer, inner, rows, cols},
                         {outer_stride, e.strides()[nb - 1], e.strides()[nb], e.strides()[nb + 1]},
                         e.offset());
    return record("reshape", v, {e}, [from = e.shape()](const Tensor& g) {
      return std::vector<Tensor>{reshape(g, from)};
    });
  };
  // A product with a head-split right operand (attention weights times values) is written in
  // that operand's layout, [batch, N, heads, d_h], so merging its heads needs no copy.
  Tensor a_grid = to_grid(a, m, k), b_grid = to_grid(b, k, n);
  Shape c_strides;
  if (b_grid.strides()[3] == 1 && !b_grid.is_contiguous())
    c_strides = strides_in_order_of(b_grid, {outer, inner, m, n});
  Tensor c = bmm_recorded(a_grid, b_grid, c_strides);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  return reshape(c, out_shape);
}

}  // namespace mixlab
