// Checks the GPU makes without stopping its queue (backends/kernels.def's check_indices).
//
// Checking an index tensor on the host means copying it back, a wait for the GPU inside every
// embedding lookup and every cross-entropy (a training step makes none). Instead a
// kernel checks the indices where they are and records the first offender in a small record in
// device memory; the backend reads that record back with its next wait for the GPU (a copy to
// the host or synchronize(), queued just before the wait, so it costs no wait of its own) and
// then throws the failed check's Error, built from the words the op gave when it queued it. A
// training step reads its loss every step, so a bad index in a batch stops the run at that
// step, with the op's own message.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace mixlab {

// Written by the check kernels, in device memory; read back into page-locked memory.
struct CheckRecord {
  int failed;  // 0, or 1 once a check has failed (atomicCAS: the first failure wins)
  int unused;
  int64_t check;  // the failed check's number (DeviceChecks::queue)
  int64_t value;  // an offending value
};

class DeviceChecks {
 public:
  DeviceChecks(int device, cudaStream_t stream);
  ~DeviceChecks();
  DeviceChecks(const DeviceChecks&) = delete;
  DeviceChecks& operator=(const DeviceChecks&) = delete;

  // Queues the check of ids[0, n) (device memory) against [0, limit) or `allowed`, with the
  // words of its Error ("<what> <value> <why>"). Returns how many checks are now unsettled.
  size_t queue(const int32_t* ids, int64_t n, int64_t limit, int64_t allowed, const char* what,
               const char* why);

  // Before a wait for the stream: when checks are pending, queues the record's copy to the host
  // and then its reset (so checks queued later start clean). Returns the mark for settle().
  int64_t before_wait();
  // After the wait: throws the Error of a failed check queued before the mark, else forgets
  // those checks as passed. One host thread drives a backend at a time (as the trainer does).
  void settle(int64_t mark);

 private:
  int device_;
  cudaStream_t stream_;
  CheckRecord* on_device_ = nullptr;
  CheckRecord* on_host_ = nullptr;  // page-locked: its copy from the device is truly async
  bool pinned_ = true;
  int64_t next_ = 1;
  bool read_back_ = false;                                        // before_wait() queued the copy
  std::map<int64_t, std::pair<std::string, std::string>> words_;  // pending checks' words
  mutable std::mutex mutex_;
};

}  // namespace mixlab
