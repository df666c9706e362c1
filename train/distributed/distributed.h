// Data-parallel training across processes: a small Communicator interface with three
// implementations (one process; MPI on the host; NCCL on GPUs with MPI as launcher and host
// channel), and DataParallel, the glue the trainer calls at a few marked points.
//
// The scheme (docs/distributed.md): N ranks run the same training loop. Every epoch's batches are
// planned for the global batch (N x --batch) exactly as one process would plan them, and rank r
// takes the r-th slice of each (DataLoaderOptions::shard_*), so N ranks see the examples that
// one process with N times the batch sees. After each micro-batch's forward pass the ranks
// exchange (loss, number of loss terms, examples, tokens, flags): every rank learns the global
// loss and scales its own loss by its share of the loss terms before backward, so the gradients
// summed across ranks are the gradient of the global mean loss (also for token-mean losses with
// unequal token counts per rank). Gradients are then summed in a few flat buckets, clipped and
// applied identically everywhere. Rank 0 broadcasts the parameters at the start, and alone writes
// checkpoints, metrics, plots and progress.
//
// Determinism: every sum across ranks is taken in float64 in rank order (0, 1, ..., N-1) and
// rounded once to float32, whatever algorithm MPI or NCCL would pick, so every rank gets the
// same bits and two runs with the same N, seed and thread count are bit-identical.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"
#include "train/run/checkpoint.h"
#include "train/data/dataset.h"

namespace mixlab {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "single process", "MPI", "NCCL"

  // Copies the root's contiguous tensor into every rank's (same shape, dtype, device).
  virtual void broadcast(const Tensor& tensor, int root = 0) = 0;
  // In place, the element-wise sum over ranks of a contiguous F32 tensor, taken in float64 in
  // rank order and rounded once: identical bits on every rank and in every rerun.
  virtual void all_reduce_sum(const Tensor& flat) = 0;
  // Host side: every rank's `values` (the same length on every rank), concatenated in rank order.
  virtual std::vector<double> all_gather(const std::vector<double>& values) = 0;
  virtual void barrier() = 0;
  // Ends this rank after a failure that the ranks agreed on (rank 0 reports it): flushes the
  // output, leaves the communicator cleanly and exits with status 1. Not for rank 0.
  [[noreturn]] virtual void exit_after_peer_failure() = 0;
  // This rank is leaving on an error the others do not know about: at exit, abort the whole job
  // (MPI_Abort) instead of finalizing, which would wait for ranks blocked in a collective.
  virtual void abort_job_at_exit() {}

  // The agreement "did any rank fail?": the lowest failing rank, or -1 when none failed.
  int first_failed_rank(bool failed);
};

// One process: every collective is the identity.
class SingleProcessCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single process"; }
  void broadcast(const Tensor&, int) override {}
  void all_reduce_sum(const Tensor&) override {}
  std::vector<double> all_gather(const std::vector<double>& values) override { return values; }
  void barrier() override {}
  [[noreturn]] void exit_after_peer_failure() override;
};

// The number of processes and this process's rank and node-local rank as set by the launcher
// (OpenMPI's OMPI_COMM_WORLD_*, or PMI_SIZE/PMI_RANK, or MIXLAB_WORLD_SIZE/MIXLAB_RANK); a
// process started without a launcher is rank 0 of 1.
struct LaunchInfo {
  int size = 1, rank = 0, local_rank = 0;
};
LaunchInfo launch_info();

// The communicator of all processes, made on first use: one process -> SingleProcess; several ->
// MPI (MPI_Init happens here; MPI_Finalize at exit), or NCCL over MPI when `device` is a CUDA
// device and NCCL was built. Several processes without MPI built in is an error that says so.
// Later calls return the same object (and must pass the same kind of device).
Communicator& world_communicator(Device device);

// Made directly (for tests and tools); both need the process to be launched by mpirun.
std::unique_ptr<Communicator> make_mpi_communicator();
std::unique_ptr<Communicator> make_nccl_communicator(Device device);  // one GPU per rank
bool mpi_available();                                                 // built with MPI
bool nccl_available();                                                // built with NCCL

// True on rank 0 of the launch (or without a launcher): the process that prints and writes.
bool is_primary_process();

// ---- the trainer's side ----

// The trainer's hooks (train/loop/trainer.cpp, marked "[distributed]"). With one process every
// method is a pass-through and nothing is exchanged, so single-process training is unchanged.
class DataParallel {
 public:
  explicit DataParallel(const Module& model);  // the model's device picks MPI or NCCL
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;
  bool active() const { return comm_.size() > 1; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  bool is_root() const { return comm_.rank() == 0; }

  // Refuses to resume a checkpoint written by a different number of ranks (the data order per
  // rank and the meaning of --batch depend on it).
  void check_resume(const TrainingState& saved, const std::string& path) const;
  // After the model is initialised or resumed: rank 0's parameters and buffers everywhere, each
  // rank's own dropout stream, and the world size recorded in `state` (saved in checkpoints).
  void start(Module& model, TrainingState& state);

  // After a micro-batch's forward pass: what the ranks agree on. `loss` is the mean of this
  // rank's loss terms (0 with an empty share); the returned loss is the global mean, `weight`
  // the factor for this rank's loss before backward, the counts are global. If any rank's loss
  // is not finite, rank 0 throws Error naming the rank and step and the others exit quietly.
  struct Share {
    double loss = 0, weight = 1;
    int64_t examples = 0, tokens = 0;
  };
  Share share(double loss, const Batch& batch, int64_t local_tokens, int64_t step);

  // After the backward passes of a step, before clipping: every gradient summed over the ranks
  // (a parameter without a gradient counts as zeros), in buckets of at most bucket_floats.
  void all_reduce_gradients(const std::vector<Tensor>& params);

  // Whether training should stop for a signal: with several ranks, whether any rank had been
  // signalled at the last share() (all ranks see the same answer at the same step).
  bool interrupted() const;

  // One line on the communication cost (rank 0, several ranks): ms per step in the gradient
  // all-reduce and in the per-micro-batch agreement.
  void report(std::ostream& out) const;

  int64_t bucket_floats = int64_t{1} << 22;  // 16 MiB of float32 per all-reduce call

 private:
  Communicator& comm_;
  bool any_interrupted_ = false;
  bool agreed_failure_ = false;  // the ranks agreed to stop with an error (not a lone failure)
  double reduce_seconds_ = 0, share_seconds_ = 0;
  int64_t reduce_calls_ = 0, reduce_steps_ = 0, share_calls_ = 0;
  int64_t gradient_floats_ = 0;
};

// The number of terms the task's loss averages over: target tokens (each target's length minus
// its <bos>) for a translation batch, examples otherwise.
int64_t loss_terms(const Batch& batch);

// The seed of rank r's dropout stream: rank 0 keeps `seed` (so its checkpointed generator state
// is the run's), the others get distinct streams derived from it.
uint64_t rank_stream_seed(uint64_t seed, int rank);

}  // namespace mixlab
