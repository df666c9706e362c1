// Shapes and strides (in elements, not bytes), and the broadcasting rule of NumPy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2,3,4]"
// When `strides` lay `shape` out densely (no gaps, no overlaps) in some axis order, as a
// permuted view of a contiguous tensor does: true, with `order` set to the axes of size > 1
// from the outermost in memory to the innermost. False for gaps, overlaps or broadcast axes.
bool dense_axis_order(const Shape& shape, const Shape& strides, std::vector<int>& order);
// NumPy broadcasting: dims aligned from the right, each pair equal or one of them 1.
// `op` names the operation in the error message.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wraps a possibly negative axis into [0, ndim); error names the op and the shape.
int normalize_axis(int64_t axis, int ndim, const char* op, const Shape& shape);

}  // namespace mixlab
