// How many rows of a row kernel one task of the pool takes: about 16k elements, enough work to
// be worth waking a thread for (shared by every row-wise CPU kernel, so they split alike).
#pragma once
#include <algorithm>
#include <cstdint>

namespace mixlab::cpu {

inline int64_t rows_per_task(int64_t cols) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols));
}

}  // namespace mixlab::cpu
