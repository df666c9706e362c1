// When the worker pool's threads spin instead of sleeping (core/parallel.cpp). A waiting thread
// spins for up to 100 microseconds, and only while the machine is quiet: no more threads
// runnable than it has CPUs.
#pragma once
#include <chrono>
#include <string_view>

namespace mixlab::pool_spin {

// How long a waiting thread may spin before it sleeps.
std::chrono::nanoseconds limit();

// Whether a thread about to wait should spin now. Reads /proc/loadavg at most every 10 ms.
bool pays();

// The runnable-thread count in /proc/loadavg's text ("0.61 0.55 0.48 2/171 4242" gives 2),
// or -1 when the text is not in that form.
int runnable_threads(std::string_view loadavg);

// The rule pays() applies to that count: spinning pays when it is known and at most `cpus`.
bool quiet(int runnable_threads, int cpus);

}  // namespace mixlab::pool_spin
