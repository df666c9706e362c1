// Helpers shared by the op files: argument checks with the messages the project promises,
// broadcast views for kernels, dense (contiguous) inputs computed off the record, and how gemm
// reads a matrix in place.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"

namespace mixlab::ops_detail {

inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

// Every operand on one device and of one floating dtype; the message names op and shapes.
inline void check_same(const char* op, const std::vector<const Tensor*>& ts) {
  const Tensor& first = *ts[0];
  for (const Tensor* t : ts) {
    check(t->defined(), op, ": an input tensor is undefined");
    if (t->device() != first.device())
      fail(op, ": inputs on different devices (", first.device().str(), " ",
           shape_str(first.shape()), " and ", t->device().str(), " ", shape_str(t->shape()),
           "); move one with .to(device)");
    if (t->dtype() != first.dtype())
      fail(op, ": dtypes differ (", dtype_name(first.dtype()), " ", shape_str(first.shape()),
           " and ", dtype_name(t->dtype()), " ", shape_str(t->shape()), ")");
  }
  check(is_floating(first.dtype()), op, ": expects floating tensors, got ",
        dtype_name(first.dtype()));
}

// A kernel view of t broadcast to `shape` (right-aligned, stride 0 on broadcast axes).
inline View broadcast_view(const Tensor& t, const Shape& shape) {
  View v = t.view();
  int offset = static_cast<int>(shape.size()) - t.dim();
  v.ndim = static_cast<int>(shape.size());
  for (int i = v.ndim - 1; i >= 0; --i) {
    int src = i - offset;
    int64_t size = src >= 0 ? t.shape()[src] : 1;
    v.shape[i] = shape[i];
    v.strides[i] = (src >= 0 && size == shape[i]) ? t.strides()[src] : 0;
  }
  return v;
}

// An optional kernel argument that is absent: no data, only the call's dtype.
inline View no_view(DType dtype) {
  View v;
  v.dtype = dtype;
  return v;
}

// An optional kernel argument: t's view when t is defined, else no_view(dtype).
inline View view_or_none(const Tensor& t, DType dtype) {
  return t.defined() ? t.view() : no_view(dtype);
}

// t's data as a contiguous tensor, without recording anything (for kernels that need it).
inline Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  NoGradGuard no_grad;
  return contiguous(t);
}

// How a [rows, cols] matrix with the given strides can be read by gemm without a copy.
struct MatrixLayout {
  bool ok = false, transposed = false;
  int64_t ld = 0;
};

inline MatrixLayout layout_of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
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

inline std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int ndim,
                                           const char* op, const Shape& shape) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normalize_axis(a, ndim, op, shape));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace mixlab::ops_detail
