// Module: the base of every layer, mixer, block and model, in the spirit of PyTorch's C++
// frontend. A module owns named parameters (trainable), buffers (saved but not trained) and
// submodules; names compose into dotted paths ("encoder.layers.0.mixer.w_v.weight") that are
// also the checkpoint keys.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace mixlab {

class Module {
 public:
  virtual ~Module() = default;
  // The class name shown by print(), e.g. "Linear".
  virtual std::string type_name() const = 0;
  // One line of settings shown by print() beside the type, e.g. "in=64, out=256".
  virtual std::string extra_repr() const { return ""; }

  // ---- the tree ----
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Parameters and buffers together: what a checkpoint stores.
  std::vector<std::pair<std::string, Tensor>> named_tensors() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  int64_t parameter_count() const;  // trainable elements
  std::string print() const;        // the module tree with parameter shapes

  // ---- modes and placement ----
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves (or converts) every parameter and buffer in place: handles held elsewhere (a member
  // `Tensor weight`, an optimizer) see the new data, as with PyTorch's module.to().
  void to(Device device);
  void to(DType dtype);
  void zero_grad();

 protected:
  Tensor register_parameter(const std::string& name, Tensor value);
  // A buffer moves with the module (to()); a persistent one is also saved in checkpoints, while
  // a transient one (PyTorch's persistent=False) is state rebuilt from the module's sizes, such
  // as an index table, that no checkpoint holds.
  Tensor register_buffer(const std::string& name, Tensor value, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, bool params, bool buffers,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  void print_into(std::string& out, const std::string& name, int depth) const;
  void collect_transient(std::vector<Tensor>& out) const;
  // What to() moves or converts: every parameter and buffer, transient ones too.
  std::vector<Tensor> moving_tensors() const;

  std::vector<std::pair<std::string, Tensor>> parameters_, buffers_, transient_buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// An ordered list of modules registered as "0", "1", ... (torch.nn.ModuleList).
template <typename M>
class ModuleList : public Module {
 public:
  std::string type_name() const override { return "ModuleList"; }
  void push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(module)));
  }
  size_t size() const { return items_.size(); }
  const std::shared_ptr<M>& operator[](size_t i) const { return items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

// Replaces t's data in place (same TensorImpl) with `value`'s: how to() and checkpoint loading
// update tensors that other handles share.
void assign_in_place(const Tensor& t, const Tensor& value);

}  // namespace mixlab
