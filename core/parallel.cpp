#include "core/parallel.h"

#include "core/error.h"
#include "core/float_env.h"
#include "core/pool_spin.h"
#include "core/settings.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace mixlab {
namespace {

// Spins until done() or until the spin limit has passed; true when done() became true. Spins
// only while the machine is quiet (core/pool_spin.cpp says why and what it measured).
template <typename Done>
bool spin_until(const Done& done) {
  if (done()) return true;
  auto limit = pool_spin::limit();
  if (limit.count() == 0 || !pool_spin::pays()) return false;
  auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (done()) return true;
    if (i % 16 == 0 && std::chrono::steady_clock::now() - start > limit) return false;
  }
}

// A fixed pool of helper threads. One parallel_for at a time hands each helper one chunk; the
// caller runs chunk 0 itself and waits for the rest. Nested calls run inline.
//
// Hand-off: the caller publishes the job and a new `ticket_` (under `mutex_`, so that a helper
// about to sleep cannot miss it); helpers spin on `ticket_` for a while after each job before
// they sleep on `wake_`. The ticket holds the job's number and its chunk count in one word, so a
// helper with no chunk in a job (fewer chunks than threads) reads a consistent pair even when it
// looks late, after the caller has moved on to the next job. The last helper to finish brings
// `pending_` to zero; the caller spins on it, then sleeps on `done_`.
class WorkerPool {
 public:
  WorkerPool() = default;
  ~WorkerPool() { stop(); }

  // Restarts the pool with `helpers` threads. When a thread cannot be created, the ones started
  // are stopped (the pool is left with none) and Error says how many started.
  void resize(int helpers) {
    std::lock_guard<std::mutex> no_run_meanwhile(run_mutex_);
    if (helpers == this->helpers()) return;
    stop();
    stopping_ = false;
    // New workers must not mistake the last finished job for a new one.
    uint64_t current = ticket_.load();
    workers_.reserve(helpers);
    for (int i = 0; i < helpers; ++i) {
      try {
        workers_.push_back(start_thread([this, i, current] { loop(i, current); }));
      } catch (const std::system_error& e) {
        const int started = i + 1;  // the calling thread counts as one
        stop();
        stopping_ = false;
        fail("cannot start ", helpers + 1, " CPU threads: the system refused thread ", started + 1,
             " (", e.what(), "); ask for fewer with --threads or MIXLAB_NUM_THREADS");
      }
    }
  }

  int helpers() const { return helper_count_.load(); }

  // Runs chunk_fn(0) .. chunk_fn(chunks - 1): chunk c + 1 on helper c, the rest (chunk 0, and
  // any chunk beyond the helpers, should the pool have shrunk meanwhile) on the caller.
  void run(int chunks, FunctionRef<void(int)> chunk_fn) {
    std::lock_guard<std::mutex> one_at_a_time(run_mutex_);
    const int handed_out = std::min(chunks, helpers() + 1);
    job_ = &chunk_fn;
    pending_.store(handed_out - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      uint64_t number = (ticket_.load(std::memory_order_relaxed) >> 32) + 1;
      ticket_.store(number << 32 | static_cast<uint32_t>(handed_out), std::memory_order_release);
    }
    wake_.notify_all();
    inside_pool() = true;
    chunk_fn(0);
    for (int c = handed_out; c < chunks; ++c) chunk_fn(c);
    inside_pool() = false;
    auto finished = [this] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(finished)) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, finished);
    }
    job_ = nullptr;
  }

  static bool& inside_pool() {
    thread_local bool inside = false;
    return inside;
  }

 private:
  void loop(int index, uint64_t seen) {
    inside_pool() = true;
    int chunk = index + 1;
    auto new_job = [&] {
      return ticket_.load(std::memory_order_acquire) != seen ||
             stopping_.load(std::memory_order_acquire);
    };
    for (;;) {
      if (!spin_until(new_job)) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, new_job);
      }
      if (stopping_.load(std::memory_order_acquire)) return;
      seen = ticket_.load(std::memory_order_acquire);
      if (chunk >= static_cast<int>(seen & 0xffffffffu)) continue;  // no chunk for this helper
      (*job_)(chunk);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller may be about to sleep
        done_.notify_one();
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    helper_count_ = 0;
  }

  template <typename Body>
  std::thread start_thread(Body body) {
    if (creations_left() == 0)
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "thread creation refused by testing::fail_thread_creation_after");
    std::thread t(std::move(body));
    if (creations_left() > 0) --creations_left();
    ++helper_count_;
    return t;
  }

 public:
  // Thread creations that may still succeed (-1: no limit); testing::fail_thread_creation_after.
  static std::atomic<int>& creations_left() {
    static std::atomic<int> n{-1};
    return n;
  }

 private:
  std::vector<std::thread> workers_;
  std::atomic<int> helper_count_{0};
  std::mutex run_mutex_, mutex_;
  std::condition_variable wake_, done_;
  // Written by the caller before it stores a new ticket (release), read by the helpers that have
  // a chunk after they see it (acquire); the caller waits for those before the next job.
  const FunctionRef<void(int)>* job_ = nullptr;
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> ticket_{0};  // job number << 32 | chunk count
  std::atomic<bool> stopping_{false};
};

int initial_threads() {
  if (int n = threads_from_environment(); n > 0) return n;
  return static_cast<int>(
      std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, unsigned{kMaxThreads}));
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> n{initial_threads()};
  return n;
}

// Starts with no helpers: the threads start on the first parallel_for or set_num_threads, where
// a failure to create one is an Error for the caller to report.
WorkerPool& pool() {
  static WorkerPool p;
  return p;
}

// Brings the pool to the setting. When threads cannot be started, the setting falls back to 1
// (the pool then holds none) before the Error goes up.
void size_pool(int n) {
  try {
    pool().resize(n - 1);
  } catch (const Error&) {
    thread_setting().store(1);
    throw;
  }
}

}  // namespace

std::string thread_count_problem(std::string_view text) {
  int n = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, n);
  if (!text.empty() && ec == std::errc() && p == end && n >= 1 && n <= kMaxThreads) return "";
  std::string problem = "'";
  problem.append(text);
  problem += "' is not a whole number of threads from 1 to " + std::to_string(kMaxThreads);
  return problem;
}

int parse_thread_count(std::string_view text, std::string_view source) {
  const std::string problem = thread_count_problem(text);
  if (!problem.empty()) fail(source, ": ", problem);
  return std::stoi(std::string(text));
}

int threads_from_environment() {
  const char* env = setting(Setting::NumThreads);
  return env ? parse_thread_count(env, "MIXLAB_NUM_THREADS") : 0;
}

int num_threads() { return thread_setting().load(); }

void set_num_threads(int n) {
  check(n >= 1 && n <= kMaxThreads, "set_num_threads: ", n, " threads; expected 1 to ",
        kMaxThreads);
  size_pool(n);
  thread_setting().store(n);
}

namespace testing {
void fail_thread_creation_after(int n) { WorkerPool::creations_left() = n < 0 ? -1 : n; }
}  // namespace testing

void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  int threads = num_threads();
  int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  int chunks = static_cast<int>(std::min<int64_t>(threads, max_chunks));
  if (chunks <= 1 || WorkerPool::inside_pool()) {
    ScopedFlushDenormals flush;
    fn(0, n);
    return;
  }
  if (pool().helpers() != threads - 1) size_pool(threads);  // the first call starts them
  int64_t per = (n + chunks - 1) / chunks;
  pool().run(chunks, [&](int c) {
    ScopedFlushDenormals flush;  // per chunk: the modes are per thread
    int64_t begin = c * per, end = std::min(n, begin + per);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace mixlab
