// The CPU reference backend: OpenBLAS for matrix products, FFTW for Fourier transforms, plain
// loops (vectorisable, split over the worker pool for large inputs) for everything else. Each
// kernel family has its own file in this folder.
#pragma once
#include "backends/backend.h"

namespace mixlab {

class CpuBackend final : public Backend {
 public:
  CpuBackend();  // puts OpenBLAS on one thread (cpu_gemm.cpp)
  const char* name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::CPU; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;

  // ---- kernels (backends/kernels.def), each family in its own file of this folder ----
#define MIXLAB_KERNEL(name, params, args, label) void name params override;
#include "backends/kernels.def"
#undef MIXLAB_KERNEL
};

}  // namespace mixlab
