// Error checking for every CUDA runtime, cuBLAS and cuFFT call: a failure becomes mixlab::Error
// naming the call, where it was made, and the library's own error string. Nothing here aborts.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>

#include "core/error.h"

namespace mixlab::cuda {

inline const char* cufft_error_string(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS:
      return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN:
      return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED:
      return "CUFFT_ALLOC_FAILED (out of device memory)";
    case CUFFT_INVALID_TYPE:
      return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE:
      return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR:
      return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED:
      return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED:
      return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE:
      return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA:
      return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE:
      return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE:
      return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED:
      return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED:
      return "CUFFT_NOT_SUPPORTED";
    default:
      return "unknown cuFFT error";
  }
}

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  const char* name = cudaGetErrorName(e);
  const char* text = cudaGetErrorString(e);
  // A non-sticky error stays as the "last error" and would be blamed on the next launch.
  cudaGetLastError();
  fail("CUDA error in ", call, " (", file, ":", line, "): ", text, " [", name, "]");
}

inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLAS error in ", call, " (", file, ":", line, "): ", cublasGetStatusString(s), " [",
       cublasGetStatusName(s), "]");
}

inline void check_cufft(cufftResult r, const char* call, const char* file, int line) {
  if (r == CUFFT_SUCCESS) return;
  fail("cuFFT error in ", call, " (", file, ":", line, "): ", cufft_error_string(r), " [code ",
       static_cast<int>(r), "]");
}

}  // namespace mixlab::cuda

#define MIXLAB_CUDA_CHECK(call) ::mixlab::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define MIXLAB_CUBLAS_CHECK(call) ::mixlab::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define MIXLAB_CUFFT_CHECK(call) ::mixlab::cuda::check_cufft((call), #call, __FILE__, __LINE__)
