// The MPI communicator (OpenMPI): host buffers; GPU tensors are staged through the host.
//
// The ordered sum (Communicator::all_reduce_sum): the buffer is cut into N equal chunks (padded);
// MPI_Alltoall hands rank r the r-th chunk of every rank; rank r adds them in rank order in
// float64 and rounds once; MPI_Allgather returns every summed chunk to everyone. Alltoall and
// allgather only move bytes, so the result does not depend on the algorithm MPI chooses, and
// each element is summed by exactly one rank: every rank holds identical bits. The traffic per
// rank is 2(N-1)/N of the buffer, the same as a ring all-reduce.
#include "train/distributed/distributed.h"

#ifdef MIXLAB_HAVE_MPI
// The C API only: the deprecated C++ bindings need another library (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace mixlab {

namespace {

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, message, &length);
  fail("MPI: ", what, " failed: ", std::string(message, static_cast<size_t>(length)));
}

bool abort_at_exit = false;

// MPI_Finalize (or, after a lone failure, MPI_Abort) when the process exits.
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (abort_at_exit) {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

void ensure_mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  // Only the main thread calls MPI (the kernels' worker pool and the loader's thread do not).
  mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  std::atexit(finalize_at_exit);
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    ensure_mpi_initialized();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "MPI"; }

  void broadcast(const Tensor& tensor, int root) override {
    check(tensor.is_contiguous(), "broadcast: the tensor must be contiguous");
    const size_t bytes = static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
    if (tensor.device().is_cpu()) {
      send_bytes(tensor.raw_data(), bytes, root);
      return;
    }
    Tensor host = tensor.to(Device::cpu()).contiguous();
    send_bytes(host.raw_data(), bytes, root);
    Tensor(tensor).copy_(host.to(tensor.device()));  // a handle: same storage
  }

  void all_reduce_sum(const Tensor& flat) override {
    check(flat.dtype() == DType::F32 && flat.dim() == 1 && flat.is_contiguous(),
          "all_reduce_sum: expected a contiguous 1-d float32 tensor, got ", flat.str());
    if (!flat.device().is_cpu()) {  // no CUDA-aware MPI assumed: through the host
      Tensor host = flat.to(Device::cpu()).contiguous();
      all_reduce_sum(host);
      Tensor(flat).copy_(host.to(flat.device()));
      return;
    }
    const int64_t n = flat.numel();
    const int64_t chunk = (n + size_ - 1) / size_;
    check(chunk < (int64_t{1} << 31), "all_reduce_sum: buffer too large for one MPI call");
    const int count = static_cast<int>(chunk);
    float* data = static_cast<float*>(flat.raw_data());
    send_.assign(static_cast<size_t>(chunk * size_), 0.0f);
    std::copy(data, data + n, send_.begin());
    recv_.resize(send_.size());
    mpi_check(MPI_Alltoall(send_.data(), count, MPI_FLOAT, recv_.data(), count, MPI_FLOAT,
                           MPI_COMM_WORLD),
              "MPI_Alltoall");
    mine_.resize(static_cast<size_t>(chunk));
    for (int64_t j = 0; j < chunk; ++j) {
      double s = 0;
      for (int r = 0; r < size_; ++r) s += recv_[static_cast<size_t>(r * chunk + j)];
      mine_[static_cast<size_t>(j)] = static_cast<float>(s);
    }
    mpi_check(MPI_Allgather(mine_.data(), count, MPI_FLOAT, send_.data(), count, MPI_FLOAT,
                            MPI_COMM_WORLD),
              "MPI_Allgather");
    std::copy(send_.begin(), send_.begin() + n, data);
  }

  std::vector<double> all_gather(const std::vector<double>& values) override {
    std::vector<double> all(values.size() * static_cast<size_t>(size_));
    mpi_check(MPI_Allgather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, all.data(),
                            static_cast<int>(values.size()), MPI_DOUBLE, MPI_COMM_WORLD),
              "MPI_Allgather");
    return all;
  }

  void barrier() override { mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  void exit_after_peer_failure() override {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    MPI_Finalize();
    std::_Exit(1);
  }

  void abort_job_at_exit() override { abort_at_exit = true; }

 private:
  void send_bytes(void* data, size_t bytes, int root) {
    char* p = static_cast<char*>(data);
    constexpr size_t kMax = size_t{1} << 30;  // MPI counts are int
    for (size_t done = 0; done < bytes; done += kMax) {
      const size_t part = std::min(kMax, bytes - done);
      mpi_check(MPI_Bcast(p + done, static_cast<int>(part), MPI_BYTE, root, MPI_COMM_WORLD),
                "MPI_Bcast");
    }
  }

  int rank_ = 0, size_ = 1;
  std::vector<float> send_, recv_, mine_;  // kept between calls: no allocation per step
};

}  // namespace

bool mpi_available() { return true; }
std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

}  // namespace mixlab
#endif  // MIXLAB_HAVE_MPI
