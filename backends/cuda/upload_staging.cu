// The page-locked ring behind CudaBackend::copy_from_host (upload_staging.h says why).
#include "backends/cuda/upload_staging.h"

#include <cuda_runtime.h>

#include <cstring>

#include "backends/cuda/cuda_check.h"

namespace mixlab {

namespace {
constexpr size_t kAlign = 256;  // each upload starts on its own 256-byte line of the ring
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool overlaps(size_t a, size_t b, size_t c, size_t d) { return a < d && c < b; }
}  // namespace

UploadStaging::UploadStaging(cudaStream_t stream, size_t ring_bytes)
    : stream_(stream), capacity_(round_up(ring_bytes)) {}

UploadStaging::~UploadStaging() {
  // Not reached in practice (backends live to the end of the process); quietly, as the backend.
  for (InFlight& f : in_flight_) {
    cudaEventSynchronize(f.done);
    cudaEventDestroy(f.done);
  }
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  if (ring_) cudaFreeHost(ring_);
}

long long UploadStaging::waits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waits_;
}

bool UploadStaging::ensure_ring_locked() {
  if (ring_) return true;
  if (unavailable_) return false;
  void* p = nullptr;
  if (cudaHostAlloc(&p, capacity_, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // not the next launch's error
    unavailable_ = true;
    return false;
  }
  ring_ = static_cast<char*>(p);
  return true;
}

cudaEvent_t UploadStaging::event_locked() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  MIXLAB_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void UploadStaging::retire_finished_locked() {
  while (!in_flight_.empty()) {
    cudaError_t state = cudaEventQuery(in_flight_.front().done);
    if (state == cudaErrorNotReady) {
      cudaGetLastError();  // "not ready" is an answer, not an error for the next launch to see
      return;
    }
    MIXLAB_CUDA_CHECK(state);
    spare_events_.push_back(in_flight_.front().done);
    in_flight_.pop_front();
  }
}

size_t UploadStaging::reserve_locked(size_t bytes) {
  const size_t need = round_up(bytes);
  if (head_ + need > capacity_) head_ = 0;  // the ring's tail is too short: wrap
  const size_t begin = head_, end = head_ + need;
  // The newest upload still using [begin, end): once it is done, so are all older ones (events
  // of one stream complete in the order they were recorded).
  size_t last_in_way = in_flight_.size();
  for (size_t i = 0; i < in_flight_.size(); ++i)
    if (overlaps(begin, end, in_flight_[i].begin, in_flight_[i].end)) last_in_way = i;
  if (last_in_way < in_flight_.size()) {
    ++waits_;
    MIXLAB_CUDA_CHECK(cudaEventSynchronize(in_flight_[last_in_way].done));
    for (size_t i = 0; i <= last_in_way; ++i) {
      spare_events_.push_back(in_flight_.front().done);
      in_flight_.pop_front();
    }
  }
  head_ = end;
  return begin;
}

bool UploadStaging::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || bytes > max_staged_bytes()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ensure_ring_locked()) return false;
  retire_finished_locked();
  const size_t at = reserve_locked(bytes);
  std::memcpy(ring_ + at, src, bytes);
  cudaEvent_t done = event_locked();
  cudaError_t copied = cudaMemcpyAsync(dst, ring_ + at, bytes, cudaMemcpyHostToDevice, stream_);
  if (copied != cudaSuccess) spare_events_.push_back(done);  // nothing queued reads the ring
  MIXLAB_CUDA_CHECK(copied);
  cudaError_t recorded = cudaEventRecord(done, stream_);
  if (recorded != cudaSuccess) {
    // The copy is queued but nothing marks its range as in use: wait for it before the ring
    // can be written again, then report.
    cudaStreamSynchronize(stream_);
    spare_events_.push_back(done);
    MIXLAB_CUDA_CHECK(recorded);
  }
  in_flight_.push_back({at, at + round_up(bytes), done});
  return true;
}

}  // namespace mixlab
