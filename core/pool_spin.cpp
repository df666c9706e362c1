// Spinning between kernel calls, and when it pays.
//
// A training step makes about 1,600 kernel calls a few microseconds apart, and waking a sleeping
// helper is a futex round trip that, on a virtual machine, costs tens of microseconds: a
// 6272x128 column sum took 39 us on 2 threads with the helper awake and 90-95 us with it asleep.
// On a quiet 2-core machine, spinning up to 100 us makes the d=128 translator's 2-thread step
// 1.38-1.41x as fast and the attention classifier's 1.09-1.11x. On a busy machine, spinning
// burns the time another runnable thread needs: with one other training process running, the
// same step ran at 0.67x. So a thread spins only while no more threads are runnable than there
// are CPUs; with that rule the busy case runs at 0.99-1.0x of never spinning. (Spinning with
// sched_yield instead is much worse when busy: 0.05-0.4x.)
#include "core/pool_spin.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <thread>

namespace mixlab::pool_spin {
namespace {

constexpr long kSpinUs = 100;
constexpr auto kSamplePeriod = std::chrono::milliseconds(10);

// /proc/loadavg's text, read without stdio (fopen would malloc inside the training step).
std::string_view read_loadavg(char (&buffer)[128]) {
  int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  ssize_t n = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  return n > 0 ? std::string_view(buffer, static_cast<size_t>(n)) : std::string_view();
}

std::atomic<int64_t> next_sample_ns{0};
std::atomic<bool> machine_quiet{true};

}  // namespace

std::chrono::nanoseconds limit() { return std::chrono::microseconds(kSpinUs); }

int runnable_threads(std::string_view text) {
  // Skip the three load averages; the fourth field is "running/total".
  size_t at = 0;
  for (int field = 0; field < 3; ++field) {
    at = text.find(' ', at);
    if (at == std::string_view::npos) return -1;
    ++at;
  }
  size_t slash = text.find('/', at);
  if (slash == std::string_view::npos || slash == at) return -1;
  int running = -1;
  auto [end, error] = std::from_chars(text.data() + at, text.data() + slash, running);
  if (error != std::errc() || end != text.data() + slash) return -1;
  return running;
}

bool quiet(int runnable, int cpus) { return runnable >= 0 && runnable <= cpus; }

bool pays() {
  // The count includes the reading thread and the pool's other running threads: on the quiet
  // 2-core machine it read 1-2, with one busy process added 3-4.
  static const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t due = next_sample_ns.load(std::memory_order_relaxed);
  if (now >= due &&
      next_sample_ns.compare_exchange_strong(
          due, now + std::chrono::nanoseconds(kSamplePeriod).count(), std::memory_order_relaxed)) {
    char buffer[128];
    machine_quiet.store(quiet(runnable_threads(read_loadavg(buffer)), cpus),
                        std::memory_order_relaxed);
  }
  return machine_quiet.load(std::memory_order_relaxed);
}

}  // namespace mixlab::pool_spin
