// Embedding lookup: gather rows of a table; backward scatter-adds into a zero table. The row
// selection and placement ops are built on the same two kernels.
#include "autograd/gradient_routing.h"
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

Tensor embedding(const Tensor& table, const Tensor& indices) {
  check_same("embedding", {&table});
  check(table.dim() == 2, "embedding: table must be [vocab, dim], got ", shape_str(table.shape()));
  check(indices.dtype() == DType::I32, "embedding: indices must be int32, got ",
        dtype_name(indices.dtype()));
  check(indices.device() == table.device(), "embedding: indices on ", indices.device().str(),
        ", table on ", table.device().str());
  int64_t vocab = table.size(0), dim = table.size(1);
  Tensor idx = dense(indices);
  // Checked where the indices are: a GPU reports a bad one at its next wait, without one here.
  const std::string why = "is out of range for a table of shape " + shape_str(table.shape());
  backend_of(idx).check_indices(idx.view(), vocab, kNoIndexAllowed, "embedding: index",
                                why.c_str());
  Shape shape = indices.shape();
  shape.push_back(dim);
  Tensor t = dense(table);
  Tensor out = Tensor::empty(shape, table.dtype(), table.device());
  if (out.numel() > 0)
    backend_of(t).gather_rows(t.view(), idx.view(), out.view(), idx.numel(), dim);
  return record("embedding", out, {table}, [table, idx, vocab, dim](const Tensor& g) {
    Tensor gd = dense(g);
    // Zeroed where the table's gradient lives (its grad slot, where it has one), then scattered.
    Tensor dtable = leaf_gradient_buffer(table, {vocab, dim}, g.dtype(), g.device());
    dtable.fill_(0.0);
    if (idx.numel() > 0)
      backend_of(g).scatter_add_rows(gd.view(), idx.view(), dtable.view(), idx.numel(), dim);
    return std::vector<Tensor>{dtable};
  });
}

Tensor select_rows(const Tensor& x, const Tensor& index) {
  check(x.dim() >= 1, "select_rows: needs at least one dimension");
  Shape shape = x.shape();
  shape[0] = index.numel();
  return reshape(embedding(reshape(x, {x.size(0), -1}), reshape(index, {-1})), shape);
}

Tensor take_rows(const Tensor& x, const Tensor& take, const Tensor& put, bool checked) {
  check_same("take_rows", {&x});
  check(x.dim() >= 1, "take_rows: needs at least one dimension");
  for (const Tensor* index : {&take, &put}) {
    check(index->dtype() == DType::I32 && index->dim() == 1,
          "take_rows: indices must be int32 "
          "vectors, got ",
          dtype_name(index->dtype()), " ", shape_str(index->shape()));
    check(index->device() == x.device(), "take_rows: indices on ", index->device().str(), ", x on ",
          x.device().str());
  }
  check(put.numel() == x.size(0), "take_rows: put ", shape_str(put.shape()),
        " must have one entry for each of the ", x.size(0), " rows of x ", shape_str(x.shape()));
  Shape shape = x.shape();
  shape[0] = take.numel();
  int64_t width = 1;
  for (int64_t a = 1; a < x.dim(); ++a) width *= x.size(a);
  Tensor t = dense(take), p = dense(put);
  if (checked) {
    const std::string why_take = "is out of range for x of shape " + shape_str(x.shape());
    const std::string why_put = "is out of range for " + std::to_string(take.numel()) + " rows";
    backend_of(t).check_indices(t.view(), x.size(0), -1, "take_rows: take index", why_take.c_str());
    backend_of(p).check_indices(p.view(), take.numel(), -1, "take_rows: put index",
                                why_put.c_str());
  }
  Tensor xd = dense(x);
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  if (out.numel() > 0)
    backend_of(xd).gather_rows(xd.view(), t.view(), out.view(), t.numel(), width);
  return record("take_rows", out, {x}, [t, p](const Tensor& g) {  // checked on the way in
    return std::vector<Tensor>{take_rows(g, p, t, false)};
  });
}

}  // namespace mixlab
