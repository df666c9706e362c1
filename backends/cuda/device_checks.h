// Checks the GPU makes without stopping its queue (backends/kernels.def's check_indices).
//
// Checking an index tensor on the host means copying it back, a wait for the GPU inside every
// embedding lookup and every cross-entropy (issue 14: none inside a training step). Instead a
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
  int64_t check;  // the failed check's number (DeviceChecks::add)
  int64_t value;  // an offending value
};

class DeviceChecks {
 public:
  DeviceChecks(int device, cudaStream_t stream);
  ~DeviceChecks();
  DeviceChecks(const DeviceChecks&) = delete;
  DeviceChecks& operator=(const DeviceChecks&) = delete;

  // Registers a check about to be queued, with the words of its Error ("<what> <value> <why>"):
  // its number and the record its kernel writes a failure to.
  std::pair<int64_t, CheckRecord*> add(const char* what, const char* why);
  // Checks registered and not yet settled by a wait.
  size_t pending() const;

  // Before a wait for the stream: queues the record's copy to the host when checks are pending.
  // Returns the mark to hand to settle().
  int64_t before_wait();
  // After the wait: throws the Error of a failed check registered before the mark (clearing the
  // record so the device stays usable), else forgets those checks as passed.
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
