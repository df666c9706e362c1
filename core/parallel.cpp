#include "core/parallel.h"

#include "core/float_env.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace mixlab {
namespace {

// A fixed pool of helper threads. One parallel_for at a time hands each helper one chunk; the
// caller runs chunk 0 itself and waits for the rest. Nested calls run inline.
class WorkerPool {
 public:
  explicit WorkerPool(int helpers) { resize(helpers); }
  ~WorkerPool() { stop(); }

  void resize(int helpers) {
    std::lock_guard<std::mutex> no_run_meanwhile(run_mutex_);
    stop();
    stopping_ = false;
    // New workers must not mistake the last finished job for a new one.
    uint64_t current = generation_;
    for (int i = 0; i < helpers; ++i)
      workers_.emplace_back([this, i, current] { loop(i, current); });
  }

  int helpers() const { return static_cast<int>(workers_.size()); }

  void run(int chunks, const std::function<void(int)>& chunk_fn) {
    std::lock_guard<std::mutex> one_at_a_time(run_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &chunk_fn;
      chunks_ = chunks;
      pending_ = chunks - 1;
      ++generation_;
    }
    wake_.notify_all();
    inside_pool() = true;
    chunk_fn(0);
    inside_pool() = false;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

  static bool& inside_pool() {
    thread_local bool inside = false;
    return inside;
  }

 private:
  void loop(int index, uint64_t seen) {
    inside_pool() = true;
    for (;;) {
      const std::function<void(int)>* job;
      int chunk = index + 1;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (chunk >= chunks_) continue;
        job = job_;
      }
      (*job)(chunk);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
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
  const std::function<void(int)>* job_ = nullptr;
  int chunks_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

int initial_threads() {
  if (const char* env = std::getenv("MIXLAB_NUM_THREADS")) {
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

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
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
