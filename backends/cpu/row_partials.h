// Column sums over the rows of a kernel (a bias's, a layer norm's or a shared kernel's gradient),
// split over the pool and still reproducible for a given thread count: the rows are cut into one
// chunk per thread (the cut depends only on the row and thread counts), each chunk accumulates
// into its own zeroed row of partial sums, and the chunks are added in order afterwards.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/parallel.h"

namespace mixlab::cpu {

// The chunks' partial sums: `chunks` rows of `width` values.
template <typename T>
struct RowPartials {
  const T* data;
  int chunks;
  int64_t width;
  // Column i summed over the chunks, in chunk order.
  T column(int64_t i) const {
    T total = 0;
    for (int c = 0; c < chunks; ++c) total += data[c * width + i];
    return total;
  }
};

// Calls body(row_begin, row_end, partial) once per chunk of [0, rows), `partial` being that
// chunk's zeroed row of `width` sums. The sums live in a buffer the calling thread keeps between
// calls (a training step in steady state allocates nothing here), valid until its next call.
template <typename T, typename Body>
RowPartials<T> accumulate_row_chunks(int64_t rows, int64_t width, const Body& body) {
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads(), std::max<int64_t>(1, rows)));
  const int64_t per = (rows + chunks - 1) / chunks;
  thread_local std::vector<T> buffer;
  buffer.assign(static_cast<size_t>(chunks) * width, T(0));
  T* sums = buffer.data();  // (the workers must see this thread's buffer, not their own)
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      body(c * per, std::min(rows, (c + 1) * per), sums + c * width);
  });
  return {sums, chunks, width};
}

}  // namespace mixlab::cpu
