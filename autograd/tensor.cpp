#include "autograd/tensor.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/random.h"

namespace mixlab {

Storage::Storage(size_t bytes, Device dev) : nbytes(bytes), device(dev) {
  data = backend_for(dev).allocate(std::max<size_t>(bytes, 1));
}
Storage::~Storage() {
  if (data) backend_for(device).deallocate(data, std::max<size_t>(nbytes, 1));
}

namespace {
std::shared_ptr<TensorImpl> new_impl(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) check(d >= 0, "tensor: negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(numel_of(shape) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return impl;
}

template <typename T>
Tensor upload(const std::vector<T>& data, const Shape& shape, DType dtype, Device device) {
  check(static_cast<int64_t>(data.size()) == numel_of(shape), "from_data: ", data.size(),
        " values do not fill shape ", shape_str(shape));
  Tensor t(new_impl(shape, dtype, device));
  backend_for(device).copy_from_host(t.raw_data(), data.data(), data.size() * sizeof(T));
  return t;
}

Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype,
                    Device device) {
  if (dtype == DType::F64) return upload(values, shape, dtype, device);
  if (dtype == DType::F32)
    return upload(std::vector<float>(values.begin(), values.end()), shape, dtype, device);
  std::vector<int32_t> ints(values.size());
  for (size_t i = 0; i < values.size(); ++i) ints[i] = static_cast<int32_t>(values[i]);
  return upload(ints, shape, dtype, device);
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return Tensor(new_impl(shape, dtype, device));
}
Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.numel() > 0) backend_for(device).fill(t.view(), value);
  return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}
Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return from_doubles(v, {n}, dtype, device);
}
Tensor Tensor::from_data(const std::vector<float>& data, const Shape& shape, Device device) {
  return upload(data, shape, DType::F32, device);
}
Tensor Tensor::from_data(const std::vector<double>& data, const Shape& shape, Device device) {
  return upload(data, shape, DType::F64, device);
}
Tensor Tensor::from_data(const std::vector<int32_t>& data, const Shape& shape, Device device) {
  return upload(data, shape, DType::I32, device);
}
Tensor Tensor::uniform(const Shape& shape, double lo, double hi, Generator& gen, DType dtype,
                       Device device) {
  std::vector<double> v(numel_of(shape));
  for (double& x : v) x = gen.uniform(lo, hi);
  return from_doubles(v, shape, dtype, device);
}
Tensor Tensor::normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype,
                      Device device) {
  std::vector<double> v(numel_of(shape));
  for (double& x : v) x = mean + std * gen.normal();
  return from_doubles(v, shape, dtype, device);
}
Tensor Tensor::truncated_normal(const Shape& shape, double mean, double std, Generator& gen,
                                DType dtype, Device device) {
  std::vector<double> v(numel_of(shape));
  for (double& x : v) {
    double z;
    do z = gen.normal();
    while (std::abs(z) > 2.0);
    x = mean + std * z;
  }
  return from_doubles(v, shape, dtype, device);
}

int64_t Tensor::size(int64_t axis) const {
  return shape()[normalize_axis(axis, dim(), "size", shape())];
}

bool Tensor::is_contiguous() const { return view().is_contiguous(); }

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data) + impl().offset * dtype_size(dtype());
}

View Tensor::view() const {
  check(dim() <= kMaxDims, "tensor of shape ", shape_str(shape()), " has more than ", kMaxDims,
        " dimensions");
  View v;
  v.data = raw_data();
  v.dtype = dtype();
  v.ndim = dim();
  for (int i = 0; i < v.ndim; ++i) {
    v.shape[i] = shape()[i];
    v.strides[i] = strides()[i];
  }
  return v;
}

namespace {
// A contiguous host copy of t in its own dtype.
Tensor host_contiguous(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor c = t.contiguous();
  if (c.device().is_cpu()) return c;
  return c.to(Device::cpu());
}
template <typename Out>
std::vector<Out> to_vector_as(const Tensor& t) {
  Tensor c = host_contiguous(t);
  std::vector<Out> out(c.numel());
  const void* p = c.raw_data();
  for (int64_t i = 0; i < c.numel(); ++i) {
    switch (c.dtype()) {
      case DType::F32:
        out[i] = static_cast<Out>(static_cast<const float*>(p)[i]);
        break;
      case DType::F64:
        out[i] = static_cast<Out>(static_cast<const double*>(p)[i]);
        break;
      case DType::I32:
        out[i] = static_cast<Out>(static_cast<const int32_t*>(p)[i]);
        break;
    }
  }
  return out;
}
}  // namespace

std::vector<float> Tensor::to_float_vector() const { return to_vector_as<float>(*this); }
std::vector<double> Tensor::to_double_vector() const { return to_vector_as<double>(*this); }
std::vector<int32_t> Tensor::to_int_vector() const { return to_vector_as<int32_t>(*this); }

double Tensor::item() const {
  check(numel() == 1, "item(): tensor of shape ", shape_str(shape()), " has ", numel(),
        " elements, not 1");
  return to_double_vector()[0];
}

Tensor Tensor::contiguous() const { return mixlab::contiguous(*this); }
Tensor Tensor::to(Device d) const { return to_device(*this, d); }
Tensor Tensor::to(DType t) const { return cast(*this, t); }
Tensor Tensor::clone() const { return mixlab::clone(*this); }
Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>(*impl_);
  impl->grad_fn.reset();
  impl->grad.reset();
  impl->grad_slot.reset();  // a detached copy must not write into the original's gradient
  impl->requires_grad = false;
  return Tensor(impl);
}

bool Tensor::requires_grad() const { return impl().requires_grad || impl().grad_fn != nullptr; }

Tensor& Tensor::set_requires_grad(bool value) {
  check(!value || is_floating(dtype()), "requires_grad: only floating tensors have gradients");
  check(is_leaf() || value, "requires_grad(false) on a non-leaf: use detach()");
  impl().requires_grad = value;
  return *this;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  run_backward(*this, grad, retain_graph);
}

void Tensor::copy_(const Tensor& src) {
  check(src.shape() == shape(), "copy_: source ", shape_str(src.shape()), " vs destination ",
        shape_str(shape()));
  check(src.device() == device(), "copy_: source on ", src.device().str(), ", destination on ",
        device().str());
  if (numel() > 0) backend_for(device()).copy(src.view(), view());
}

void Tensor::fill_(double value) {
  if (numel() == 0) return;
  if (is_contiguous()) {
    backend_for(device()).fill(view(), value);
  } else {  // one value broadcast (stride 0) over the view: one pass, no full-size temporary
    Tensor one = full({}, value, dtype(), device());
    copy_(make_view(one, shape(), Shape(shape().size(), 0), one.offset()));
  }
}

Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl().storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(impl);
}

// ---- printing ----
namespace {
void print_values(std::ostringstream& out, const std::vector<double>& v, const Shape& shape,
                  const Shape& strides, size_t axis, int64_t base, DType dtype) {
  const int64_t edge = 3;
  int64_t n = shape[axis];
  out << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * edge && i == edge) {
      out << "..., ";
      i = n - edge;
    }
    if (axis + 1 == shape.size()) {
      double x = v[base + i * strides[axis]];
      if (dtype == DType::I32)
        out << static_cast<int64_t>(x);
      else
        out << std::setprecision(5) << x;
    } else {
      print_values(out, v, shape, strides, axis + 1, base + i * strides[axis], dtype);
    }
    if (i + 1 < n) out << (axis + 1 == shape.size() ? ", " : ",\n ");
  }
  out << "]";
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype())
      << ", device=" << device().str();
  if (requires_grad()) out << ", requires_grad";
  out << ")\n";
  std::vector<double> v = to_double_vector();
  if (dim() == 0)
    out << v[0];
  else
    print_values(out, v, shape(), contiguous_strides(shape()), 0, 0, dtype());
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace mixlab
