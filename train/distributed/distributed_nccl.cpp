// The NCCL communicator: gradients stay on the GPU; one process per GPU (the launcher's
// node-local rank picks the GPU, see distributed.cpp). MPI launches the ranks, carries NCCL's
// bootstrap id from rank 0, and answers the small host-side questions (all_gather, barrier).
//
// The ordered sum mirrors the MPI one (distributed_mpi.cpp) so that results do not depend on the
// ring or tree NCCL picks: grouped ncclSend/ncclRecv form an all-to-all of equal chunks, each rank
// sums its chunk over the ranks in rank order in float64 with the engine's own reduction kernel
// (a fixed order per element), and ncclAllGather hands the rounded sums to every rank.
//
// Streams: the CUDA backend runs on its own stream and NCCL on another; the backend is
// synchronised before each collective and the NCCL stream after it, so no kernel sees a buffer
// half-written.
#include "train/distributed/distributed.h"

#ifdef MIXLAB_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace mixlab {

namespace {

void nccl_check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) fail("NCCL: ", what, " failed: ", ncclGetErrorString(rc));
}
void cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) fail("CUDA: ", what, " failed: ", cudaGetErrorString(rc));
}

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(Device device) : device_(device), host_(make_mpi_communicator()) {
    check(device.is_cuda(), "NCCL communicator: ", device.str(), " is not a CUDA device");
    cuda_check(cudaSetDevice(device.index), "cudaSetDevice");
    ncclUniqueId id;
    if (host_->rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    // The id travels as int32 values through the host communicator.
    std::vector<int32_t> words((sizeof id + 3) / 4, 0);
    std::memcpy(words.data(), &id, sizeof id);
    Tensor id_tensor = Tensor::from_data(words, {static_cast<int64_t>(words.size())});
    host_->broadcast(id_tensor, 0);
    std::memcpy(&id, id_tensor.raw_data(), sizeof id);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    nccl_check(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string name() const override { return "NCCL"; }

  void broadcast(const Tensor& tensor, int root) override {
    check(tensor.is_contiguous(), "broadcast: the tensor must be contiguous");
    if (!tensor.device().is_cuda()) return host_->broadcast(tensor, root);
    const size_t bytes = static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
    backend_for(tensor.device()).synchronize();
    nccl_check(
        ncclBroadcast(tensor.raw_data(), tensor.raw_data(), bytes, ncclChar, root, comm_, stream_),
        "ncclBroadcast");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void all_reduce_sum(const Tensor& flat) override {
    check(flat.dtype() == DType::F32 && flat.dim() == 1 && flat.is_contiguous(),
          "all_reduce_sum: expected a contiguous 1-d float32 tensor, got ", flat.str());
    if (!flat.device().is_cuda()) return host_->all_reduce_sum(flat);
    NoGradGuard no_grad;
    const int n_ranks = size();
    const int64_t n = flat.numel();
    const int64_t chunk = (n + n_ranks - 1) / n_ranks;
    Tensor send = Tensor::zeros({chunk * n_ranks}, DType::F32, flat.device());
    narrow(send, 0, 0, n).copy_(flat);
    Tensor recv = Tensor::empty({chunk * n_ranks}, DType::F32, flat.device());
    backend_for(flat.device()).synchronize();
    float* s = static_cast<float*>(send.raw_data());
    float* r = static_cast<float*>(recv.raw_data());
    const size_t count = static_cast<size_t>(chunk);
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int peer = 0; peer < n_ranks; ++peer) {
      nccl_check(ncclSend(s + peer * chunk, count, ncclFloat, peer, comm_, stream_), "ncclSend");
      nccl_check(ncclRecv(r + peer * chunk, count, ncclFloat, peer, comm_, stream_), "ncclRecv");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    // Row p of [ranks, chunk] is rank p's part of my chunk: summed over p in float64, in order.
    Tensor mine = sum(reshape(recv, {n_ranks, chunk}).to(DType::F64), {0}).to(DType::F32);
    mine = mine.contiguous();
    backend_for(flat.device()).synchronize();
    nccl_check(ncclAllGather(mine.raw_data(), send.raw_data(), count, ncclFloat, comm_, stream_),
               "ncclAllGather");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    Tensor(flat).copy_(narrow(send, 0, 0, n));  // a handle: same storage
  }

  std::vector<double> all_gather(const std::vector<double>& values) override {
    return host_->all_gather(values);
  }
  void barrier() override { host_->barrier(); }
  void exit_after_peer_failure() override { host_->exit_after_peer_failure(); }
  void abort_job_at_exit() override { host_->abort_job_at_exit(); }

 private:
  Device device_;
  std::unique_ptr<Communicator> host_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

bool nccl_available() { return true; }
std::unique_ptr<Communicator> make_nccl_communicator(Device device) {
  return std::make_unique<NcclCommunicator>(device);
}

}  // namespace mixlab
#endif  // MIXLAB_HAVE_NCCL
