// CUDA's transcendental functions as the policy the shared formulas take (backends/
// elementwise_ops.h, backends/fused_ops.h): used by elementwise.cu and fused.cu.
#pragma once
#include "backends/cuda/common.cuh"

namespace mixlab::cuda {

// CUDA's transcendental functions for the shared formulas (backends/elementwise_ops.h).
struct CudaMath {
  template <typename T>
  static __device__ __forceinline__ T exp(T x) {
    return d_exp(x);
  }
  template <typename T>
  static __device__ __forceinline__ T erf(T x) {
    return d_erf(x);
  }
  template <typename T>
  static __device__ __forceinline__ T log(T x) {
    return d_log(x);
  }
  template <typename T>
  static __device__ __forceinline__ T sqrt(T x) {
    return d_sqrt(x);
  }
  template <typename T>
  static __device__ __forceinline__ T tanh(T x) {
    return d_tanh(x);
  }
  template <typename T>
  static __device__ __forceinline__ T sin(T x) {
    return d_sin(x);
  }
  template <typename T>
  static __device__ __forceinline__ T cos(T x) {
    return d_cos(x);
  }
  template <typename T>
  static __device__ __forceinline__ T pow(T x, T y) {
    return d_pow(x, y);
  }
};

}  // namespace mixlab::cuda
