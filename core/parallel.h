// The engine's one threading setting. It sizes the CPU kernels' worker pool, which also splits
// the matrix products (OpenBLAS itself is kept on one thread), so "2 threads" means 2
// everywhere. Read once from MIXLAB_NUM_THREADS (else the number of cores); set_num_threads()
// changes it at run time.
#pragma once
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace mixlab {

// A non-owning reference to a callable, valid while the callable lives (the call that takes it).
// parallel_for takes its body this way rather than as a std::function: a kernel's lambda
// captures more than std::function stores inline, so each kernel call would malloc its copy.
template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT: implicit, like std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) over [0, n) split into at most num_threads() contiguous chunks. Work under
// `grain` items runs inline on the calling thread. The split depends only on n and the thread
// count, so results are reproducible for a given thread count. Every chunk runs with subnormals
// flushed to zero (core/float_env.h).
void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

}  // namespace mixlab
