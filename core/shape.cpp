#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace mixlab {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool dense_axis_order(const Shape& shape, const Shape& strides, std::vector<int>& order) {
  order.clear();
  for (int i = 0; i < static_cast<int>(shape.size()); ++i)
    if (shape[i] > 1) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (strides[*it] != expected) return false;
    expected *= shape[*it];
  }
  return true;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, ": ", shape_str(a), " and ", shape_str(b), " cannot be broadcast (dimension ", i,
           ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int normalize_axis(int64_t axis, int ndim, const char* op, const Shape& shape) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim)
    fail(op, ": axis ", axis, " is out of range for a tensor of shape ", shape_str(shape));
  return static_cast<int>(a);
}

}  // namespace mixlab
