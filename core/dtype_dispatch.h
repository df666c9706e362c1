// From a runtime dtype to a compile-time type: kernels are written once as templates over T and
// called through these, by every backend (the CPU's .cpp files and the CUDA .cu files alike).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace mixlab {

// Calls fn(T{}) with T the C++ type of a floating dtype; any other dtype is an error naming `op`
// (the kernel), since only float32 and float64 are differentiable.
template <typename F>
void dispatch_floating(DType dtype, const char* op, const F& fn) {
  switch (dtype) {
    case DType::F32:
      fn(float{});
      return;
    case DType::F64:
      fn(double{});
      return;
    case DType::I32:
      break;
  }
  fail(op, ": unsupported dtype ", dtype_name(dtype), " (float32 or float64 expected)");
}

// Calls fn(T{}) with T the C++ type of any dtype (copies and fills, which only move data).
template <typename F>
void dispatch_all(DType dtype, const F& fn) {
  switch (dtype) {
    case DType::F32:
      fn(float{});
      return;
    case DType::F64:
      fn(double{});
      return;
    case DType::I32:
      fn(int32_t{});
      return;
  }
  fail("dtype dispatch: invalid dtype value ", static_cast<int>(dtype));
}

}  // namespace mixlab
