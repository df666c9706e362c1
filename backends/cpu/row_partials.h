// Column sums over the rows of a kernel (a bias's, a layer norm's or a shared kernel's gradient),
// split over the pool and still reproducible: the rows are cut into chunks (one per thread, or a
// fixed number whatever the thread count), each chunk accumulates into its own zeroed row of
// partial sums, and the chunks are added in order afterwards.
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
  // Columns [begin, begin + count) as column() sums them (the same bits), into out: chunk by
  // chunk along the columns, which the compiler's vectors can take. column() called per element
  // ran as scalar adds: the pass over a weight gradient's partials split along k cost 0.9% of
  // the attention classifier's step.
  void sum_columns(int64_t begin, int64_t count, T* __restrict out) const {
    std::fill(out, out + count, T(0));
    for (int c = 0; c < chunks; ++c) {
      const T* __restrict row = data + c * width + begin;
      for (int64_t i = 0; i < count; ++i) out[i] += row[i];
    }
  }
};

// Calls body(row_begin, row_end, partial) once per chunk of [0, rows), `chunks` chunks in all
// (at most one per row), `partial` being that chunk's zeroed row of `width` sums; the chunks are
// shared out over the pool. The sums live in a buffer the calling thread keeps between calls (a
// training step in steady state allocates nothing here), valid until its next call. The chunks
// depend only on `rows` and `chunks`, so a fixed count gives the same bits on every thread count.
template <typename T, typename Body>
RowPartials<T> accumulate_row_blocks(int64_t rows, int64_t width, int64_t chunks,
                                     const Body& body) {
  const int n = static_cast<int>(std::max<int64_t>(1, std::min(chunks, rows)));
  const int64_t per = (rows + n - 1) / n;
  thread_local std::vector<T> buffer;
  buffer.assign(static_cast<size_t>(n) * width, T(0));
  T* sums = buffer.data();  // (the workers must see this thread's buffer, not their own)
  parallel_for(n, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      body(c * per, std::min(rows, (c + 1) * per), sums + c * width);
  });
  return {sums, n, width};
}

// The same with one chunk per thread: the fewest partial rows, reproducible for a given thread
// count.
template <typename T, typename Body>
RowPartials<T> accumulate_row_chunks(int64_t rows, int64_t width, const Body& body) {
  return accumulate_row_blocks<T>(rows, width, num_threads(), body);
}

}  // namespace mixlab::cpu
