// MIXLAB_DEBUG: a backend that wraps another and reports every kernel call, to see inside a
// model without a profiler.
//   MIXLAB_DEBUG=1  at exit, a table of kernel calls: count, total and mean time, share
//   MIXLAB_DEBUG=2  also one line per call as it runs: kernel name and shapes
// With CUDA the wrapper synchronises after each kernel so its time is the kernel's own (this
// serialises the GPU: use it to look, not to benchmark).
#pragma once
#include <memory>

#include "backends/backend.h"

namespace mixlab {

// 0 when MIXLAB_DEBUG is unset or 0, else its level.
int debug_level();
// `inner` wrapped in a tracer (backend_for() does this when debug_level() > 0).
std::unique_ptr<Backend> make_tracing_backend(Backend& inner, int level);
// Forgets the calls every tracer has counted so far: the exit table then covers only what runs
// after, e.g. a benchmark's timed steps without its warm-up (whose first touches of fresh memory
// land in whichever kernel writes it first). Nothing to do when no tracer exists.
void reset_kernel_trace();

}  // namespace mixlab
