// Views (reshape, transpose, permute, narrow, expand) and copies (contiguous, concat, casts,
// device moves). Views share storage; their backward maps the gradient back onto the input's
// geometry.
#include <numeric>

#include "autograd/gradient_routing.h"
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {
// A fresh contiguous copy of x in `dtype`, not recorded.
Tensor copy_dense(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  if (out.numel() > 0) backend_of(x).copy(x.view(), out.view());
  return out;
}
}  // namespace

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return record("contiguous", copy_dense(x, x.dtype()), {x},
                [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor clone(const Tensor& x) {
  return record("clone", copy_dense(x, x.dtype()), {x},
                [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = copy_dense(x, dtype);
  if (!is_floating(dtype) || !is_floating(x.dtype())) return out;
  return record("cast", out, {x},
                [from = x.dtype()](const Tensor& g) { return std::vector<Tensor>{cast(g, from)}; });
}

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor src = dense(x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  size_t bytes = x.numel() * dtype_size(x.dtype());
  if (bytes) {
    if (src.device().is_cpu()) {
      backend_for(device).copy_from_host(out.raw_data(), src.raw_data(), bytes);
    } else if (device.is_cpu()) {
      backend_of(src).copy_to_host(out.raw_data(), src.raw_data(), bytes);
    } else {  // device to device through the host
      std::vector<char> host(bytes);
      backend_of(src).copy_to_host(host.data(), src.raw_data(), bytes);
      backend_for(device).copy_from_host(out.raw_data(), host.data(), bytes);
    }
  }
  return record("to_device", out, {x}, [from = x.device()](const Tensor& g) {
    return std::vector<Tensor>{to_device(g, from)};
  });
}

Tensor reshape(const Tensor& x, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      check(infer < 0, "reshape: more than one -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    check(known > 0 && x.numel() % known == 0, "reshape: cannot reshape ", shape_str(x.shape()),
          " into ", shape_str(shape));
    shape[infer] = x.numel() / known;
  }
  check(numel_of(shape) == x.numel(), "reshape: cannot reshape ", shape_str(x.shape()), " (",
        x.numel(), " elements) into ", shape_str(shape));
  if (shape == x.shape()) return x;
  Tensor src = contiguous(x);  // a view when possible, else one recorded copy
  Tensor out = make_view(src, shape, contiguous_strides(shape), src.offset());
  return record("reshape", out, {src}, [from = src.shape()](const Tensor& g) {
    return std::vector<Tensor>{reshape(g, from)};
  });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& axes) {
  check(static_cast<int>(axes.size()) == x.dim(), "permute: ", axes.size(),
        " axes given for a tensor of shape ", shape_str(x.shape()));
  Shape shape(x.dim()), strides(x.dim());
  std::vector<int64_t> inverse(x.dim(), -1);
  for (int i = 0; i < x.dim(); ++i) {
    int a = normalize_axis(axes[i], x.dim(), "permute", x.shape());
    check(inverse[a] < 0, "permute: axis ", a, " repeated");
    inverse[a] = i;
    shape[i] = x.shape()[a];
    strides[i] = x.strides()[a];
  }
  Tensor out = make_view(x, shape, strides, x.offset());
  return record("permute", out, {x},
                [inverse](const Tensor& g) { return std::vector<Tensor>{permute(g, inverse)}; });
}

Tensor transpose(const Tensor& x, int64_t axis0, int64_t axis1) {
  std::vector<int64_t> axes(x.dim());
  std::iota(axes.begin(), axes.end(), 0);
  int a = normalize_axis(axis0, x.dim(), "transpose", x.shape());
  int b = normalize_axis(axis1, x.dim(), "transpose", x.shape());
  std::swap(axes[a], axes[b]);
  return permute(x, axes);
}

Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length) {
  int a = normalize_axis(axis, x.dim(), "narrow", x.shape());
  check(start >= 0 && length >= 0 && start + length <= x.shape()[a], "narrow: [", start, ", ",
        start + length, ") is outside axis ", a, " of shape ", shape_str(x.shape()));
  Shape shape = x.shape();
  shape[a] = length;
  Tensor out = make_view(x, shape, x.strides(), x.offset() + start * x.strides()[a]);
  // A parameter's window (gMLP's halves of U): its gradient goes straight into the parameter's
  // grad slot where it has one (add_to_leaf_window).
  Tensor leaf = x.requires_grad() && !x.grad_fn() ? x : Tensor();
  return record("narrow", out, {x}, [leaf, from = x.shape(), a, start, length](const Tensor& g) {
    // The whole axis: the gradient as it came, in its own layout (a copy into zeros would cost a
    // pass and, for a strided g, a second one where the next op needs it contiguous).
    if (start == 0 && length == from[a]) return std::vector<Tensor>{g};
    if (leaf.defined() && add_to_leaf_window(leaf, a, start, length, g))
      return std::vector<Tensor>{Tensor()};
    // Scatter the gradient into zeros of the input's shape: the window gets g, and only the
    // parts before and after it are zeroed (a split's halves each write the full input's size;
    // zeroing it all first would write the window twice).
    Tensor full = Tensor::empty(from, g.dtype(), g.device());
    auto part = [&](int64_t begin, int64_t size) {
      Shape shape = from;
      shape[a] = size;
      return make_view(full, shape, full.strides(), begin * full.strides()[a]);
    };
    part(start, length).copy_(g);
    if (start > 0) part(0, start).fill_(0.0);
    if (start + length < from[a]) part(start + length, from[a] - start - length).fill_(0.0);
    return std::vector<Tensor>{full};
  });
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end) {
  return narrow(x, axis, start, end - start);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check(shape.size() >= static_cast<size_t>(x.dim()), "expand: cannot expand ",
        shape_str(x.shape()), " to fewer dimensions ", shape_str(shape));
  Shape target = broadcast_shapes(x.shape(), shape, "expand");
  check(target == shape, "expand: ", shape_str(x.shape()), " cannot be expanded to ",
        shape_str(shape));
  if (shape == x.shape()) return x;
  View v = broadcast_view(x, shape);
  Shape strides(v.strides, v.strides + v.ndim);
  Tensor out = make_view(x, shape, strides, x.offset());
  return record("expand", out, {x}, [from = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, from)};
  });
}

// Inserting or removing a size-1 axis moves no element, so both are views whatever the strides.
// (As reshapes they copied a non-contiguous input: matmul's transposed weight, once a step, and
// its gradient came back transposed, for a second, transposing copy into the weight's .grad.)
// A new axis takes the stride a contiguous tensor would give it, so contiguous stays contiguous.
Tensor unsqueeze(const Tensor& x, int64_t axis) {
  int a = normalize_axis(axis, x.dim() + 1, "unsqueeze", x.shape());
  Shape shape = x.shape(), strides = x.strides();
  int64_t stride = a < x.dim() ? x.strides()[a] * x.shape()[a] : 1;
  shape.insert(shape.begin() + a, 1);
  strides.insert(strides.begin() + a, stride);
  Tensor out = make_view(x, shape, strides, x.offset());
  return record("unsqueeze", out, {x},
                [a](const Tensor& g) { return std::vector<Tensor>{squeeze(g, a)}; });
}

Tensor squeeze(const Tensor& x, int64_t axis) {
  int a = normalize_axis(axis, x.dim(), "squeeze", x.shape());
  check(x.shape()[a] == 1, "squeeze: axis ", a, " of shape ", shape_str(x.shape()), " is not 1");
  Shape shape = x.shape(), strides = x.strides();
  shape.erase(shape.begin() + a);
  strides.erase(strides.begin() + a);
  Tensor out = make_view(x, shape, strides, x.offset());
  return record("squeeze", out, {x},
                [a](const Tensor& g) { return std::vector<Tensor>{unsqueeze(g, a)}; });
}

namespace {
// Whether the pieces are parameters (leaves that take gradients) lying back to back in one
// buffer in their order, so that joining them along the first axis is a view of that memory.
// Only parameters: their values change only through the optimizer, between steps, so a view
// reads what a copy would have; anything else a caller might still write in place (a bucket of
// gradients about to be all-reduced) gets its own buffer, as before.
bool parameters_back_to_back(const std::vector<Tensor>& xs) {
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].is_contiguous() || !xs[i].requires_grad() || xs[i].grad_fn()) return false;
    if (i > 0 && (xs[i].impl().storage != xs[0].impl().storage ||
                  xs[i].offset() != xs[i - 1].offset() + xs[i - 1].numel()))
      return false;
  }
  return true;
}
}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  check(!xs.empty(), "concat: no tensors");
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : xs) ptrs.push_back(&t);
  check_same("concat", ptrs);
  int a = normalize_axis(axis, xs[0].dim(), "concat", xs[0].shape());
  Shape shape = xs[0].shape();
  shape[a] = 0;
  for (const Tensor& t : xs) {
    bool ok = t.dim() == xs[0].dim();
    for (int d = 0; ok && d < t.dim(); ++d) ok = d == a || t.shape()[d] == xs[0].shape()[d];
    if (!ok)
      fail("concat: shapes ", shape_str(xs[0].shape()), " and ", shape_str(t.shape()),
           " differ outside axis ", a);
    shape[a] += t.shape()[a];
  }
  std::vector<int64_t> sizes;
  for (const Tensor& t : xs) sizes.push_back(t.shape()[a]);
  // Parameters already back to back in one buffer, in order, joined along the first axis (the
  // packed projection [W_Q; W_K; W_V], laid out together by the optimizer): the result is a view
  // of that memory and nothing is copied (on a GPU, three launches fewer each way).
  const bool adjacent = a == 0 && parameters_back_to_back(xs);
  Tensor out = adjacent ? make_view(xs[0], shape, contiguous_strides(shape), xs[0].offset())
                        : Tensor::empty(shape, xs[0].dtype(), xs[0].device());
  for (int64_t i = 0, start = 0; !adjacent && i < static_cast<int64_t>(xs.size()); ++i) {
    const Tensor& t = xs[i];
    if (t.numel() > 0) {
      Tensor window = make_view(out, t.shape(), out.strides(), start * out.strides()[a]);
      backend_of(t).copy(t.view(), window.view());
    }
    start += t.shape()[a];
  }
  out = record("concat", out, xs, [sizes, a](const Tensor& g) {
    std::vector<Tensor> grads;
    int64_t s = 0;
    for (int64_t n : sizes) {
      grads.push_back(narrow(g, a, s, n));
      s += n;
    }
    return grads;
  });
  // Marks the view for gradient routing: its gradient may be written into the pieces' grad
  // slots at once (leaf_gradient_buffer in autograd/gradient_routing.h).
  if (adjacent && out.grad_fn()) out.grad_fn()->joins_adjacent_leaves = true;
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis) {
  int a = normalize_axis(axis, x.dim(), "split", x.shape());
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  check(total == x.shape()[a], "split: sizes add up to ", total, " but axis ", a, " of ",
        shape_str(x.shape()), " has ", x.shape()[a]);
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t n : sizes) {
    parts.push_back(narrow(x, a, start, n));
    start += n;
  }
  return parts;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  check(!xs.empty(), "stack: no tensors");
  int a = normalize_axis(axis, xs[0].dim() + 1, "stack", xs[0].shape());
  std::vector<Tensor> expanded;
  for (const Tensor& t : xs) {
    if (t.shape() != xs[0].shape())
      fail("stack: shapes ", shape_str(xs[0].shape()), " and ", shape_str(t.shape()), " differ");
    expanded.push_back(unsqueeze(t, a));
  }
  return concat(expanded, a);
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  int lead = grad.dim() - static_cast<int>(shape.size());
  check(lead >= 0, "sum_to: cannot reduce ", shape_str(grad.shape()), " to ", shape_str(shape));
  std::vector<int64_t> axes;
  for (int i = 0; i < grad.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && grad.shape()[i] != 1)) axes.push_back(i);
  Tensor s = axes.empty() ? grad : sum(grad, axes, true);
  return reshape(s, shape);
}

}  // namespace mixlab
