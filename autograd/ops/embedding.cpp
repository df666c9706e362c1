// Embedding lookup: gather rows of a table; backward scatter-adds into a zero table. The row
// selection and placement ops are built on the same two kernels.
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

Tensor place_rows(const Tensor& x, const Tensor& index, int64_t rows) {
  check_same("place_rows", {&x});
  check(x.dim() >= 1, "place_rows: needs at least one dimension");
  check(index.dtype() == DType::I32 && index.dim() == 1 && index.numel() == x.size(0),
        "place_rows: index must be int32 [", x.size(0), "] for x of shape ", shape_str(x.shape()),
        ", got ", dtype_name(index.dtype()), " ", shape_str(index.shape()));
  check(index.device() == x.device(), "place_rows: index on ", index.device().str(), ", x on ",
        x.device().str());
  check(rows >= 0, "place_rows: rows must be at least 0, got ", rows);
  Shape shape = x.shape();
  shape[0] = rows;
  int64_t width = 1;
  for (int64_t a = 1; a < x.dim(); ++a) width *= x.size(a);
  Tensor idx = dense(index);
  const std::string why = "is out of range for " + std::to_string(rows) + " rows";
  backend_of(idx).check_indices(idx.view(), rows, kNoIndexAllowed, "place_rows: index",
                                why.c_str());
  Tensor xd = dense(x);
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  out.fill_(0.0);
  if (xd.numel() > 0)
    backend_of(xd).scatter_add_rows(xd.view(), idx.view(), out.view(), idx.numel(), width);
  Shape x_shape = x.shape();
  return record("place_rows", out, {x}, [idx, width, x_shape](const Tensor& g) {
    Tensor gd = dense(g);
    Tensor dx = Tensor::empty(x_shape, g.dtype(), g.device());
    if (dx.numel() > 0)
      backend_of(gd).gather_rows(gd.view(), idx.view(), dx.view(), idx.numel(), width);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace mixlab
