// Tensor: a view (shape, strides, offset, dtype) onto shared storage on one device, plus the
// autograd fields (requires_grad, accumulated grad, the node that produced it).
//
// Copying a Tensor copies the handle, not the data (like torch.Tensor). Views share storage.
// The differentiable operations live in autograd/ops.h; this file holds only what is a property
// of the tensor itself.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace mixlab {

struct Node;
class Generator;

// A block of device memory, freed through its backend when the last view lets go.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape, strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::F32;
  bool requires_grad = false;        // set on leaves by the user
  std::shared_ptr<TensorImpl> grad;  // accumulated by backward() on leaves
  std::shared_ptr<Node> grad_fn;     // set on results of recorded ops
  // Where backward() puts this leaf's gradient when set (an optimizer's flat gradient buffer,
  // train/optimizer.h): the first gradient is written or copied into it, later ones are added
  // in place (autograd/engine.cpp).
  std::shared_ptr<TensorImpl> grad_slot;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::cpu());
  static Tensor arange(int64_t n, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor from_data(const std::vector<float>& data, const Shape& shape,
                          Device device = Device::cpu());
  static Tensor from_data(const std::vector<double>& data, const Shape& shape,
                          Device device = Device::cpu());
  static Tensor from_data(const std::vector<int32_t>& data, const Shape& shape,
                          Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::F32, Device device = Device::cpu());
  // Seeded draws, made on the host so every device gets the same numbers.
  static Tensor uniform(const Shape& shape, double lo, double hi, Generator& gen,
                        DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor normal(const Shape& shape, double mean, double std, Generator& gen,
                       DType dtype = DType::F32, Device device = Device::cpu());
  // Normal cut at mean ± 2 std by redrawing (as torch.nn.init.trunc_normal_ with a = -2std).
  static Tensor truncated_normal(const Shape& shape, double mean, double std, Generator& gen,
                                 DType dtype = DType::F32, Device device = Device::cpu());

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int dim() const { return static_cast<int>(impl().shape.size()); }
  int64_t size(int64_t axis) const;
  int64_t numel() const { return numel_of(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  bool is_contiguous() const;
  std::string str() const;  // shape, dtype, device and values (abbreviated when large)

  // ---- raw data (CPU tensors only) ----
  template <typename T>
  T* data() const {
    check(device().is_host(), "data(): tensor is on ", device().str(), "; call .to(cpu) first");
    check(dtype() == dtype_of<T>::value, "data(): tensor is ", dtype_name(dtype()));
    return static_cast<T*>(impl().storage->data) + impl().offset;
  }
  void* raw_data() const;  // pointer at the first element, any device
  View view() const;       // the kernel-level description of this tensor
  // Values in logical (row-major) order, copied to the host and converted.
  std::vector<float> to_float_vector() const;
  std::vector<double> to_double_vector() const;
  std::vector<int32_t> to_int_vector() const;
  double item() const;  // the one value of a single-element tensor

  // ---- conversions (differentiable through autograd/ops.h where noted) ----
  Tensor contiguous() const;       // self if already contiguous, else a copy (recorded)
  Tensor to(Device device) const;  // copy to another device (recorded)
  Tensor to(DType dtype) const;    // converted copy (recorded for floating types)
  Tensor clone() const;            // contiguous copy (recorded)
  Tensor detach() const;           // same storage, no autograd history

  // ---- autograd ----
  bool requires_grad() const;  // leaf flag, or produced by a recorded op
  Tensor& set_requires_grad(bool value = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }
  void set_grad(const Tensor& g) const { impl().grad = g.impl_; }
  void zero_grad() const { impl().grad.reset(); }  // like PyTorch's set_to_none
  // The preallocated home of this leaf's gradient (see TensorImpl::grad_slot); undefined = none.
  Tensor grad_slot() const { return impl().grad_slot ? Tensor(impl().grad_slot) : Tensor(); }
  void set_grad_slot(const Tensor& slot) const { impl().grad_slot = slot.impl_; }
  // Whether nothing but this handle holds the tensor and its memory (no other handle, view or
  // rule's capture; the graph keeps a parent as its place only, without memory): an op handed
  // such a tensor as an rvalue may write its result there.
  bool memory_unshared() const {
    return impl_ && impl_.use_count() == 1 && impl_->storage.use_count() == 1;
  }
  // The same, and no graph of its own: a gradient the backward engine hands a rule can then be
  // written in place.
  bool sole_owner() const { return memory_unshared() && !requires_grad(); }
  // A sole owner laid out densely: a kernel may write its result over it element for element.
  bool writable_in_place() const { return sole_owner() && is_contiguous(); }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  void set_grad_fn(std::shared_ptr<Node> node) { impl().grad_fn = std::move(node); }
  // Reverse-mode from this scalar (grad defaults to 1) or with an explicit upstream gradient.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;

  // ---- in-place (not recorded: for optimizers, initialisers and loading) ----
  void copy_(const Tensor& src);  // same shape; dtype converted; devices must match
  void fill_(double value);

  TensorImpl& impl() const {
    check(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same_as(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// A view onto t's storage with new geometry (no autograd record; ops wrap this).
Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace mixlab
