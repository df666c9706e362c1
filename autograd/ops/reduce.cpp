// Reductions over any set of axes. The kernel reduces the middle of [outer, n, inner] of
// contiguous memory. A tensor laid out densely in another axis order is reduced where it lies
// when its reduced axes are one run in memory; a contiguous one whose reduced axes form several
// runs is reduced run by run; otherwise the reduced axes are first permuted to the end (one
// copy).
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// For a densely laid out x (dense_axis_order, like a gradient coming back through merge_heads)
// whose reduced axes are adjacent in memory and whose kept axes are in memory in their logical
// order: the kernel's [outer, n, inner] sizes over x's
// memory as it is, without a copy. False otherwise.
bool reduce_in_place(const Tensor& x, const std::vector<int64_t>& axes, int64_t& outer, int64_t& n,
                     int64_t& inner) {
  std::vector<int> order;
  if (!dense_axis_order(x.shape(), x.strides(), order) || order.empty()) return false;
  auto reduced = [&](int axis) { return std::find(axes.begin(), axes.end(), axis) != axes.end(); };
  int64_t o = 1, r = 1, i = 1;  // outer, n, inner: written only on success
  int stage = 0;                // 0: kept axes before the run, 1: in the run, 2: kept axes after it
  int last_kept = -1;
  for (int axis : order) {
    if (reduced(axis)) {
      if (stage == 2) return false;
      stage = 1;
      r *= x.shape()[axis];
    } else {
      if (axis < last_kept) return false;
      last_kept = axis;
      if (stage == 1) stage = 2;
      (stage == 0 ? o : i) *= x.shape()[axis];
    }
  }
  outer = o, n = r, inner = i;
  return true;
}

// The raw reduction (not recorded); returns the keepdim shape.
Tensor reduce_forward(ReduceOp op, const char* name, const Tensor& x,
                      const std::vector<int64_t>& axes) {
  check_same(name, {&x});
  bool adjacent = axes.empty() || axes.back() - axes.front() + 1 == (int64_t)axes.size();
  if (!adjacent && x.is_contiguous() && x.numel() > 0) {
    // Reduced axes in several runs (a bias broadcast over [B, N, h] gets its gradient summed over
    // axes 0 and 2): one reduction per run, innermost run first, each on the last one's small
    // contiguous result, instead of a transposing copy of all of x (gMLP's gate: the copy wrote
    // 12.8 MB and the sum read it again, per layer).
    NoGradGuard no_grad;
    Tensor partial = x;
    size_t end = axes.size();
    while (end > 0) {
      size_t begin = end - 1;
      while (begin > 0 && axes[begin - 1] + 1 == axes[begin]) --begin;
      partial = reduce_forward(op, name, partial,
                               std::vector<int64_t>(axes.begin() + begin, axes.begin() + end));
      end = begin;
    }
    return partial;
  }
  Shape keep_shape = reduced_shape(x.shape(), axes, true);
  Tensor out = Tensor::empty(keep_shape, x.dtype(), x.device());
  if (out.numel() == 0) return out;
  check(x.numel() > 0 || op == ReduceOp::Sum, name, ": reducing an empty tensor ",
        shape_str(x.shape()));
  Tensor src = x;
  int64_t outer = 1, n = 1, inner = 1;
  if (adjacent && x.is_contiguous()) {
    for (int i = 0; i < x.dim(); ++i) {
      if (!axes.empty() && i < axes.front())
        outer *= x.shape()[i];
      else if (!axes.empty() && i <= axes.back())
        n *= x.shape()[i];
      else
        inner *= x.shape()[i];
    }
    if (axes.empty()) outer = 1, inner = x.numel();
  } else if (reduce_in_place(x, axes, outer, n, inner)) {
    // src is x: its memory starts at its first element and is read as [outer, n, inner].
  } else {
    std::vector<int64_t> order;
    for (int i = 0; i < x.dim(); ++i)
      if (std::find(axes.begin(), axes.end(), i) == axes.end()) order.push_back(i);
    for (int64_t a : axes) order.push_back(a);
    NoGradGuard no_grad;
    src = contiguous(permute(x, order));
    for (int64_t a : axes) n *= x.shape()[a];
    outer = x.numel() / std::max<int64_t>(n, 1);
  }
  if (x.numel() == 0) {
    out.fill_(0.0);
    return out;
  }
  backend_of(x).reduce(op, src.view(), outer, n, inner, out.view());
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  auto axes = normalize_axes(axes_in, x.dim(), "sum", x.shape());
  Tensor out = reduce_forward(ReduceOp::Sum, "sum", x, axes);
  Shape keep_shape = out.shape();
  if (!keepdim)
    out = make_view(out, reduced_shape(x.shape(), axes, false),
                    contiguous_strides(reduced_shape(x.shape(), axes, false)), 0);
  return record("sum", out, {x}, [from = x.shape(), keep_shape](const Tensor& g) {
    return std::vector<Tensor>{expand(reshape(g, keep_shape), from)};
  });
}

Tensor sum(const Tensor& x) {
  std::vector<int64_t> all(x.dim());
  for (int i = 0; i < x.dim(); ++i) all[i] = i;
  return sum(x, all, false);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  auto axes = normalize_axes(axes_in, x.dim(), "mean", x.shape());
  int64_t count = 1;
  for (int64_t a : axes) count *= x.shape()[a];
  check(count > 0, "mean: over an empty axis of ", shape_str(x.shape()));
  return mul(sum(x, axes, keepdim), 1.0 / static_cast<double>(count));
}

Tensor mean(const Tensor& x) {
  std::vector<int64_t> all(x.dim());
  for (int i = 0; i < x.dim(); ++i) all[i] = i;
  return mean(x, all, false);
}

Tensor max(const Tensor& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  auto axes = normalize_axes(axes_in, x.dim(), "max", x.shape());
  Tensor kept = reduce_forward(ReduceOp::Max, "max", x, axes);
  Shape out_shape = reduced_shape(x.shape(), axes, keepdim);
  Tensor out = make_view(kept, out_shape, contiguous_strides(out_shape), 0);
  return record("max", out, {x}, [x, kept, axes](const Tensor& g) {
    // Gradient to the maximal entries, shared evenly between ties.
    Tensor hit = equal(x, kept);
    Tensor count = sum(hit, axes, true);
    Tensor share = div(reshape(g, kept.shape()), count);
    return std::vector<Tensor>{mul(hit, share)};
  });
}

}  // namespace mixlab
