// The engine's one threading setting. It sizes the CPU kernels' worker pool, which also splits
// the matrix products (OpenBLAS itself is kept on one thread), so "2 threads" means 2
// everywhere. Read once from MIXLAB_NUM_THREADS (else the number of cores); set_num_threads()
// changes it at run time.
#pragma once
#include <cstdint>
#include <functional>

namespace mixlab {

int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) over [0, n) split into at most num_threads() contiguous chunks. Work under
// `grain` items runs inline on the calling thread. The split depends only on n and the thread
// count, so results are reproducible for a given thread count. Every chunk runs with subnormals
// flushed to zero (core/float_env.h).
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace mixlab
