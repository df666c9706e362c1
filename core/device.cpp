#include "core/device.h"

#include "core/error.h"

namespace mixlab {

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "ref") return Device::ref();
  if (name == "cuda") return Device::cuda(0);
  if (name.rfind("cuda:", 0) == 0) {
    try {
      return Device::cuda(std::stoi(name.substr(5)));
    } catch (...) {
    }
  }
  fail("unknown device '", name, "': expected cpu, ref, cuda or cuda:N");
}

}  // namespace mixlab
