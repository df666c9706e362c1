#include "nn/module.h"

#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace mixlab {

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check(value.defined(), type_name(), ": parameter '", name, "' is undefined");
  check(name.find('.') == std::string::npos, "parameter names cannot contain '.': ", name);
  value = value.detach();
  value.set_requires_grad(true);
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check(name.find('.') == std::string::npos, "buffer names cannot contain '.': ", name);
  auto& list = persistent ? buffers_ : transient_buffers_;
  list.emplace_back(name, value.detach());
  return list.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check(module != nullptr, type_name(), ": submodule '", name, "' is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool params, bool buffers,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  if (params)
    for (const auto& [n, t] : parameters_) out.emplace_back(prefix + n, t);
  if (buffers)
    for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, child] : children_) child->collect(prefix + n + ".", params, buffers, out);
}

void Module::collect_transient(std::vector<Tensor>& out) const {
  for (const auto& [n, t] : transient_buffers_) out.push_back(t);
  for (const auto& [n, child] : children_) child->collect_transient(out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, false, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, true, out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, true, out);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::print_into(std::string& out, const std::string& name, int depth) const {
  std::string indent(depth * 2, ' ');
  out += indent + (name.empty() ? "" : "(" + name + "): ") + type_name();
  std::string extra = extra_repr();
  if (!extra.empty()) out += "(" + extra + ")";
  for (const auto& [n, t] : parameters_) out += " " + n + shape_str(t.shape());
  for (const auto& [n, t] : buffers_) out += " " + n + shape_str(t.shape()) + "(buffer)";
  for (const auto& [n, t] : transient_buffers_)
    out += " " + n + shape_str(t.shape()) + "(buffer, not saved)";
  out += "\n";
  for (const auto& [n, child] : children_) child->print_into(out, n, depth + 1);
}

std::string Module::print() const {
  std::string out;
  print_into(out, "", 0);
  out += "parameters: " + std::to_string(parameter_count()) + "\n";
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, child] : children_) child->train(on);
}

void assign_in_place(const Tensor& t, const Tensor& value) {
  TensorImpl& dst = t.impl();
  const TensorImpl& src = value.impl();
  dst.storage = src.storage;
  dst.shape = src.shape;
  dst.strides = src.strides;
  dst.offset = src.offset;
  dst.dtype = src.dtype;
  dst.grad.reset();
}

std::vector<Tensor> Module::moving_tensors() const {
  std::vector<Tensor> all;
  for (auto& [n, t] : named_tensors()) all.push_back(t);
  collect_transient(all);
  return all;
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (Tensor& t : moving_tensors())
    if (t.device() != device) assign_in_place(t, t.to(device));
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (Tensor& t : moving_tensors())
    if (is_floating(t.dtype()) && t.dtype() != dtype) assign_in_place(t, t.to(dtype));
}

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.zero_grad();
}

}  // namespace mixlab
