// The backend interface: the complete list of primitive kernels the engine needs from a device.
//
// Everything above this file (ops, autograd, nn, train) is device-independent and calls only
// these kernels. The kernels themselves, with their signatures and contracts, are listed once in
// backends/kernels.def; this class declares them from there. To add a device, implement this
// class (backends/reference/ writes each kernel as its formula; docs/kernels.md has the recipe)
// and register it in backends/registry.cpp; the op harness (tests/test_ops_backends.cpp) then
// compares every kernel with the reference backend in float64 on the same inputs.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "backends/elementwise_ops.h"
#include "backends/optim_updates.h"
#include "core/device.h"
#include "core/dtype.h"

namespace mixlab {

constexpr int kMaxDims = 8;

// check_indices' `allowed` when no value outside [0, limit) may pass (no int32 index equals it).
constexpr int64_t kNoIndexAllowed = std::numeric_limits<int64_t>::min();

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
//
// With `inner` > 0 the items sit on a two-level grid [batch / inner, inner], as a head-split
// view [batch, heads, rows, cols] lays them out without a copy: item i is at
// (i / inner) * outer_stride_* + (i % inner) * stride_* (gemm_item_offset). inner = 0 is one
// level, item i at i * stride_*.
//
// On such a grid with more than one outer item, outer_stride_c = 0 sums: the items of each inner
// index share one C, C = alpha * Σ_o op(A_o) @ op(B_o) + beta * C, added in outer order (the
// gradient of an operand broadcast over the outer level, without a [batch, ...] buffer and a
// reduction after it). gemm_sums_outer says when.
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
  int64_t inner = 0;
  int64_t outer_stride_a = 0, outer_stride_b = 0, outer_stride_c = 0;
};

// What gemm_epilogue does to each row of C after the product (backends/kernels.def).
enum class GemmEpilogue : uint8_t {
  Bias,           // C += bias
  BiasGelu,       // C += bias, then aux = gelu_erf(C); C keeps the pre-activation
  BiasGeluSlope,  // C += bias, then aux = gelu_erf(C) and C = gelu_erf'(C): the slope the
                  // backward multiplies by (the pre-activation itself is not kept)
  Times,          // C *= aux (aux: BiasGeluSlope's slope, for GELU's gradient)
  RowSums,        // C untouched; aux [m] = Σ_k op(A)[i, k]: with a weight's gradient dYᵀX, its
                  // bias's gradient Σ_t dY[t], taken while the product reads dY
};

// Whether g sums its outer items into one C per inner index (see GemmArgs).
inline bool gemm_sums_outer(const GemmArgs& g) {
  return g.inner > 0 && g.batch > g.inner && g.outer_stride_c == 0;
}

// Where batch item i of an operand starts, in elements (see GemmArgs).
inline int64_t gemm_item_offset(const GemmArgs& g, int64_t i, int64_t stride,
                                int64_t outer_stride) {
  return g.inner > 0 ? (i / g.inner) * outer_stride + (i % g.inner) * stride : i * stride;
}

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
// The kinds of device this build has, for --version and `mixlab mixers`: "cpu, ref" and, with
// the CUDA backend compiled in, "cuda".
std::string built_devices();
// Float64 where the device computes in it, else float32: for sums and counts that must not round.
DType widest_float(Device device);

}  // namespace mixlab
