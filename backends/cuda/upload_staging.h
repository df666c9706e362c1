// Uploads that do not wait for the GPU (no device-to-host synchronisation inside a
// training step).
//
// cudaMemcpyAsync from ordinary (pageable) host memory waits for the stream before it starts, so
// every batch, mask or index tensor a step uploads used to drain the GPU's queue: the host then
// stood idle until the GPU had finished, and the GPU idled while the host queued the next
// kernels. Here an upload is first copied on the host into a ring of page-locked memory and
// sent from there with cudaMemcpyAsync, which returns at once; the caller may free or reuse its
// buffer immediately (the data it passed is already in the ring). An event recorded after each
// copy says when its part of the ring may be written again. The ring is reused in order, and
// events on one stream complete in order, so the host waits only when it is a whole ring ahead
// of the GPU (then for the oldest uploads in its way, not for the whole queue).
//
// Uploads larger than a quarter of the ring (checkpoints, data sets moved at once) are left to
// the caller's synchronous path, where the extra host copy would buy nothing; so is everything
// when page-locked memory cannot be had (upload() returns false).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace mixlab {

class UploadStaging {
 public:
  // `stream` is the backend's: uploads are ordered with its kernels. The caller makes the
  // stream's GPU current before upload() (CudaBackend::copy_from_host does).
  explicit UploadStaging(cudaStream_t stream, size_t ring_bytes = kDefaultRingBytes);
  ~UploadStaging();
  UploadStaging(const UploadStaging&) = delete;
  UploadStaging& operator=(const UploadStaging&) = delete;

  static constexpr size_t kDefaultRingBytes = size_t(8) << 20;

  // Queues the copy of `bytes` from host `src` to device `dst` on the stream and returns without
  // waiting for it; `src` may be reused at once. False, with nothing queued, when the upload is
  // too large to stage or no page-locked memory could be allocated.
  bool upload(void* dst, const void* src, size_t bytes);

  // The largest upload that is staged.
  size_t max_staged_bytes() const { return capacity_ / 4; }
  // Host waits so far for ring space the GPU had not released yet (tests, MIXLAB_DEBUG).
  long long waits() const;

 private:
  struct InFlight {
    size_t begin, end;  // [begin, end) of the ring
    cudaEvent_t done;   // recorded after the copy that reads it
  };
  bool ensure_ring_locked();
  size_t reserve_locked(size_t bytes);  // waits for older uploads in the way
  void retire_finished_locked();        // frees the oldest uploads the GPU has done
  cudaEvent_t event_locked();

  cudaStream_t stream_;
  size_t capacity_;
  char* ring_ = nullptr;
  bool unavailable_ = false;  // cudaHostAlloc failed: every upload takes the caller's path
  size_t head_ = 0;           // where the next upload goes
  std::deque<InFlight> in_flight_;
  std::vector<cudaEvent_t> spare_events_;
  long long waits_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace mixlab
