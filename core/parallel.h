// The engine's one threading setting. It sizes the CPU kernels' worker pool, which also splits
// the matrix products (OpenBLAS itself is kept on one thread), so "2 threads" means 2
// everywhere. Read once from MIXLAB_NUM_THREADS (else the number of cores, at most
// kMaxThreads); set_num_threads() changes it at run time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
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

// The most threads a setting may ask for. A fixed number rather than one derived from the
// machine, so that a run's settings (config.ini) mean the same everywhere: beyond a few per core
// more threads only add scheduling, and a typo (1000 for 100) should not start a thousand.
constexpr int kMaxThreads = 256;

// What is wrong with a thread count given as text ("'0' is not a whole number of threads from 1
// to 256"), or "" when it is a whole number in [1, kMaxThreads].
std::string thread_count_problem(std::string_view text);
// The thread count a text asks for; anything else throws Error "SOURCE: " + the problem, naming
// the flag or variable it came from.
int parse_thread_count(std::string_view text, std::string_view source);

// MIXLAB_NUM_THREADS parsed by parse_thread_count; 0 when it is unset. The one place the
// variable is read.
int threads_from_environment();

// The setting (first call: MIXLAB_NUM_THREADS, else the cores; Error when the variable is bad).
int num_threads();
// Sets the count and starts the pool's threads at once. n outside [1, kMaxThreads] throws
// Error. When the system refuses a thread (a process limit, no memory for its stack), the
// threads started are stopped, the setting falls back to 1 and Error says how many of how
// many started: a failure to start threads ends a command with a message, never a hang.
void set_num_threads(int n);

namespace testing {
// Makes every thread creation after the next `n` fail as the system would (std::system_error),
// to test the failure path without exhausting a real limit; -1 lifts the limit.
void fail_thread_creation_after(int n);
}  // namespace testing

// Runs fn(begin, end) over [0, n) split into at most num_threads() contiguous chunks. Work under
// `grain` items runs inline on the calling thread. The split depends only on n and the thread
// count, so results are reproducible for a given thread count. Every chunk runs with subnormals
// flushed to zero (core/float_env.h).
void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

}  // namespace mixlab
