// Which backend serves which device. The CPU and the reference backend (plain loops, the other
// backends' oracle) are always there; the CUDA backend is compiled in when the build found nvcc
// (MIXLAB_HAVE_CUDA) and is usable when a GPU is present at run time.
#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "backends/tracing_backend.h"
#include "core/error.h"

#include <map>
#include <memory>
#include <mutex>

#ifdef MIXLAB_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace mixlab {

bool device_available(DeviceType type) {
  if (type == DeviceType::CPU || type == DeviceType::Ref) return true;
#ifdef MIXLAB_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::string built_devices() {
#ifdef MIXLAB_HAVE_CUDA
  return "cpu, ref, cuda";
#else
  return "cpu, ref";
#endif
}

DType widest_float(Device device) {
  return backend_for(device).supports(DType::F64) ? DType::F64 : DType::F32;
}

namespace {
// With MIXLAB_DEBUG set, every backend is handed out wrapped in a tracer (tracing_backend.h).
Backend& maybe_traced(Backend& inner) {
  if (debug_level() == 0) return inner;
  static std::mutex& mutex = *new std::mutex();  // outlives every static tensor
  static std::map<Backend*, std::unique_ptr<Backend>>* traced =
      new std::map<Backend*, std::unique_ptr<Backend>>();  // reports when the process exits
  static struct Report {
    ~Report() { traced->clear(); }
  } report_at_exit;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*traced)[&inner];
  if (!slot) slot = make_tracing_backend(inner, debug_level());
  return *slot;
}
}  // namespace

Backend& backend_for(Device device) {
  static CpuBackend cpu;
  static ReferenceBackend reference;
  if (device.is_cpu()) return maybe_traced(cpu);
  if (device.is_ref()) return maybe_traced(reference);
#ifdef MIXLAB_HAVE_CUDA
  int count = cuda_device_count();
  check(count > 0, "device ", device.str(),
        " requested but no CUDA GPU is present (the CUDA backend is built; the driver found "
        "no device)");
  check(device.index < count, "device ", device.str(), " requested but only ", count,
        " CUDA device(s) exist");
  return maybe_traced(cuda_backend(device.index));
#else
  fail("device ", device.str(),
       " requested but this build has no CUDA backend (configure with -DMIXLAB_CUDA=ON on a "
       "machine with nvcc)");
#endif
}

}  // namespace mixlab
