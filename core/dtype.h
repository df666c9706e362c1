// Element types. float32 everywhere; float64 on the CPU for gradient checks; int32 for indices
// (token ids, class targets), which only move data and are never differentiated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mixlab {

enum class DType : uint8_t { F32, F64, I32 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F64:
      return 8;
    case DType::I32:
      return 4;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::F64:
      return "float64";
    case DType::I32:
      return "int32";
  }
  return "?";
}

inline bool is_floating(DType t) { return t == DType::F32 || t == DType::F64; }

template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::I32;
};

}  // namespace mixlab
