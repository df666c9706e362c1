#include "core/parallel.h"

#include "core/float_env.h"
#include "core/pool_spin.h"
#include "core/settings.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
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
  explicit WorkerPool(int helpers) { resize(helpers); }
  ~WorkerPool() { stop(); }

  void resize(int helpers) {
    std::lock_guard<std::mutex> no_run_meanwhile(run_mutex_);
    stop();
    stopping_ = false;
    // New workers must not mistake the last finished job for a new one.
    uint64_t current = ticket_.load();
    for (int i = 0; i < helpers; ++i)
      workers_.emplace_back([this, i, current] { loop(i, current); });
  }

  int helpers() const { return static_cast<int>(workers_.size()); }

  void run(int chunks, FunctionRef<void(int)> chunk_fn) {
    std::lock_guard<std::mutex> one_at_a_time(run_mutex_);
    job_ = &chunk_fn;
    pending_.store(chunks - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      uint64_t number = (ticket_.load(std::memory_order_relaxed) >> 32) + 1;
      ticket_.store(number << 32 | static_cast<uint32_t>(chunks), std::memory_order_release);
    }
    wake_.notify_all();
    inside_pool() = true;
    chunk_fn(0);
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
  }

  std::vector<std::thread> workers_;
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
  if (const char* env = setting(Setting::NumThreads)) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> n{initial_threads()};
  return n;
}

WorkerPool& pool() {
  static WorkerPool p(num_threads() - 1);
  return p;
}

}  // namespace

int num_threads() { return thread_setting().load(); }

void set_num_threads(int n) {
  n = std::max(1, n);
  thread_setting().store(n);
  if (pool().helpers() != n - 1) pool().resize(n - 1);
}

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
  int64_t per = (n + chunks - 1) / chunks;
  pool().run(chunks, [&](int c) {
    ScopedFlushDenormals flush;  // per chunk: the modes are per thread
    int64_t begin = c * per, end = std::min(n, begin + per);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace mixlab
