// The cost of the gradient all-reduce alone (train/distributed/distributed.h), without the waiting
// for the slowest rank that the trainer's own measurement includes: under mpirun, every rank sums a
// float32 buffer of --floats elements --iters times, with a barrier before each timed call.
//
//   mpirun -np 2 build/bench_allreduce --floats 100000 --iters 50
//
// Prints the median and the fastest time per call on rank 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "train/distributed/distributed.h"

using namespace mixlab;

int main(int argc, char** argv) {
  int64_t floats = 100000;
  int iters = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--floats")) floats = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  }
  if (floats < 1 || iters < 1) {
    std::fprintf(stderr, "usage: bench_allreduce [--floats N] [--iters K] (under mpirun)\n");
    return 2;
  }
  try {
    Communicator& comm = world_communicator(Device::cpu());
    Tensor buffer = Tensor::full({floats}, 1.0 + comm.rank());
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) {
      comm.barrier();
      auto t0 = std::chrono::steady_clock::now();
      comm.all_reduce_sum(buffer);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    if (comm.rank() == 0)
      std::printf(
          "all-reduce of %lld floats (%.2f MB) over %d process(es) (%s): median %.3f ms, "
          "fastest %.3f ms (%d calls)\n",
          static_cast<long long>(floats), floats * 4e-6, comm.size(), comm.name().c_str(),
          ms[ms.size() / 2], ms.front(), iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
