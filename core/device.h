// Where a tensor's storage lives. Ops never copy between devices silently: mixing is an error.
// The CPU and the reference device (backends/reference/: every kernel in plain loops) both keep
// their tensors in host memory.
#pragma once
#include <string>

namespace mixlab {

enum class DeviceType : uint8_t { CPU, CUDA, Ref };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  static Device ref() { return {DeviceType::Ref, 0}; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_ref() const { return type == DeviceType::Ref; }
  // Whether the storage is host memory that the CPU reads and writes directly (cpu, ref).
  bool is_host() const { return is_cpu() || is_ref(); }
  std::string str() const {
    return is_cpu() ? "cpu" : is_ref() ? "ref" : "cuda:" + std::to_string(index);
  }
};

// Parses "cpu", "ref", "cuda", "cuda:1"; anything else is an Error.
Device parse_device(const std::string& name);

}  // namespace mixlab
