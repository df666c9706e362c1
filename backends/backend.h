// The backend interface: the complete list of primitive kernels the engine needs from a device.
//
// Everything above this file (ops, autograd, nn, train) is device-independent and calls only
// these kernels. The kernels themselves, with their signatures and contracts, are listed once in
// backends/kernels.def; this class declares them from there. To add a device, implement this
// class (see backends/cpu/ for the reference and docs/kernels.md for the recipe) and register it
// in backends/registry.cpp; the op harness (tests/test_ops_backends.cpp) then compares every
// kernel with the CPU in float64 on the same inputs.
#pragma once
#include <cstdint>

#include "backends/elementwise_ops.h"
#include "backends/optim_updates.h"
#include "core/device.h"
#include "core/dtype.h"

namespace mixlab {

constexpr int kMaxDims = 8;

struct View {
  void* data = nullptr;
  DType dtype = DType::F32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  bool is_contiguous() const {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != s) return false;
      s *= shape[i];
    }
    return true;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

enum class ReduceOp : uint8_t { Sum, Max, Min };

// C = alpha * op(A) @ op(B) + beta * C for `batch` row-major matrices. op(A) is m x k, op(B) is
// k x n; lda/ldb/ldc are row strides; stride_* step between batch items (0 broadcasts).
struct GemmArgs {
  DType dtype = DType::F32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  double alpha = 1.0, beta = 0.0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual DeviceType device_type() const = 0;
  virtual bool supports(DType) const { return true; }

  // ---- memory ----
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() {}

  // ---- kernels: one pure virtual per entry of backends/kernels.def ----
#define MIXLAB_KERNEL(name, params, args, label) virtual void name params = 0;
#include "backends/kernels.def"
#undef MIXLAB_KERNEL
};

// The backend that owns a device; throws Error when that device is not available.
Backend& backend_for(Device device);
// Whether a device of this type exists in this build and on this machine.
bool device_available(DeviceType type);

}  // namespace mixlab
