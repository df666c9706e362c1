#include "train/distributed/distributed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "core/settings.h"
#include "train/run/interrupt.h"

namespace mixlab {

namespace {

int env_int(Setting which, int fallback) {
  const char* name = setting_name(which);
  const char* v = setting(which);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  check(end && *end == '\0' && x >= 0 && x < (1 << 24), "environment variable ", name, "='", v,
        "' is not a rank or process count");
  return static_cast<int>(x);
}

// The process count a launcher announced, without throwing (this runs before main).
[[maybe_unused]] int announced_world_size() {
  for (Setting size : {Setting::OmpiWorldSize, Setting::PmiSize, Setting::WorldSize})
    if (const char* v = setting(size)) return std::atoi(v);
  return 1;
}

// One GPU per rank: a rank started by a launcher sees only the GPU of its node-local rank, as
// cuda:0. This runs before main, hence before the CUDA runtime reads the variable; a user who set
// CUDA_VISIBLE_DEVICES chose for themselves and is left alone.
[[maybe_unused]] const bool gpu_per_rank_selected = [] {
#ifdef MIXLAB_HAVE_CUDA
  const char* local = setting(Setting::OmpiLocalRank);
  if (!local) local = setting(Setting::MpiLocalRankId);
  if (!local) local = setting(Setting::LocalRank);
  if (local && announced_world_size() > 1 && setting(Setting::CudaVisibleDevices) == nullptr)
    setenv("CUDA_VISIBLE_DEVICES", local, 1);
#endif
  return true;
}();

}  // namespace

int Communicator::first_failed_rank(bool failed) {
  std::vector<double> all = all_gather({failed ? 1.0 : 0.0});
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != 0.0) return static_cast<int>(r);
  return -1;
}

void SingleProcessCommunicator::exit_after_peer_failure() {
  fail("exit_after_peer_failure: a single process has no peers");
}

LaunchInfo launch_info() {
  LaunchInfo info;
  const Setting names[][3] = {{Setting::OmpiWorldSize, Setting::OmpiRank, Setting::OmpiLocalRank},
                              {Setting::PmiSize, Setting::PmiRank, Setting::MpiLocalRankId},
                              {Setting::WorldSize, Setting::Rank, Setting::LocalRank}};
  for (auto& n : names) {
    if (!setting(n[0])) continue;
    info.size = std::max(1, env_int(n[0], 1));
    info.rank = env_int(n[1], 0);
    info.local_rank = env_int(n[2], info.rank);
    check(info.rank < info.size, setting_name(n[1]), "=", info.rank, " is not below ",
          setting_name(n[0]), "=", info.size);
    break;
  }
  return info;
}

#ifndef MIXLAB_HAVE_MPI
bool mpi_available() { return false; }
std::unique_ptr<Communicator> make_mpi_communicator() {
  fail(
      "this mixlab was built without MPI: install libopenmpi-dev and openmpi-bin "
      "(scripts/install-deps.sh) and rebuild to train with mpirun -np N");
}
#endif
#ifndef MIXLAB_HAVE_NCCL
bool nccl_available() { return false; }
std::unique_ptr<Communicator> make_nccl_communicator(Device) {
  fail(
      "this mixlab was built without NCCL (it needs the CUDA backend, MPI and the toolkit's "
      "nccl.h and libnccl)");
}
#endif

Communicator& world_communicator(Device device) {
  static std::unique_ptr<Communicator> world;
  static Device made_for;
  if (world) {
    check(world->size() == 1 || made_for.type == device.type,
          "world_communicator: already made for ", made_for.str(), ", asked for ", device.str());
    return *world;
  }
  LaunchInfo info = launch_info();
  if (info.size <= 1) {
    world = std::make_unique<SingleProcessCommunicator>();
  } else {
    check(mpi_available(), "started as one of ", info.size,
          " processes (by mpirun or a similar launcher), but this mixlab was built without MPI: "
          "install libopenmpi-dev and openmpi-bin (scripts/install-deps.sh) and rebuild, or run "
          "it as a single process");
    world = device.is_cuda() && nccl_available() ? make_nccl_communicator(device)
                                                 : make_mpi_communicator();
  }
  made_for = device;
  return *world;
}

bool is_primary_process() { return launch_info().rank == 0; }

int64_t loss_terms(const Batch& batch) {
  if (batch.tgt_len > 0) {  // a translation batch (classification leaves tgt empty)
    int64_t n = 0;
    for (int32_t l : batch.tgt_lengths) n += std::max<int32_t>(l - 1, 0);
    return n;
  }
  int64_t n = 0;
  for (int32_t label : batch.labels) n += label != -100;
  return batch.labels.empty() ? batch.size : n;
}

uint64_t rank_stream_seed(uint64_t seed, int rank) {
  return rank == 0 ? seed
                   : mix64(seed ^ mix64(0xD1B54A32D192ED03ull * static_cast<uint64_t>(rank)));
}

// ---- DataParallel ----

namespace {

Device device_of(const Module& model) {
  auto params = model.parameters();
  return params.empty() ? Device::cpu() : params.front().device();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

DataParallel::DataParallel(const Module& model) : comm_(world_communicator(device_of(model))) {}

DataParallel::~DataParallel() {
  // Leaving the trainer by an exception that only this rank saw: the others wait in a
  // collective, so ending this process normally (MPI_Finalize waits for them) would hang the
  // job. The error is printed by the caller as usual; then the whole job is aborted at exit.
  if (!active()) return;
  if (std::uncaught_exceptions() > 0) {
    if (!agreed_failure_) comm_.abort_job_at_exit();
    return;
  }
  // The end of training (done or interrupted): no rank leaves before rank 0 has written its
  // last checkpoint, since a launcher may end the whole job when the first rank exits.
  comm_.barrier();
}

void DataParallel::check_resume(const TrainingState& saved, const std::string& path) const {
  auto it = saved.extra.find("world_size");
  const int saved_size = it == saved.extra.end() ? 1 : std::stoi(it->second);
  check(saved_size == size(), "--resume: ", path, " was written by a run of ", saved_size,
        saved_size == 1 ? " process" : " data-parallel processes", ", and this run has ", size(),
        ". The per-process batch and each process's share of the data depend on that number, so "
        "resume with ",
        saved_size == 1 ? std::string("a single process")
                        : "mpirun -np " + std::to_string(saved_size),
        ", or start a new run in another --out folder");
}

void DataParallel::start(Module& model, TrainingState& state) {
  if (!active()) return;
  state.extra["world_size"] = std::to_string(size());
  for (auto& [name, tensor] : model.named_tensors()) comm_.broadcast(tensor, 0);
  // Each rank its own dropout stream; the counters stay in step (see share()), so rank 0's
  // checkpointed (seed, counter) rebuilds every rank's stream on resume.
  Generator& gen = default_generator();
  gen.set_state(rank_stream_seed(gen.seed(), rank()), gen.counter());
}

DataParallel::Share DataParallel::share(double loss, const Batch& batch, int64_t local_tokens,
                                        int64_t step) {
  Share s;
  if (!active()) {
    s.loss = loss;
    s.examples = batch.size;
    s.tokens = local_tokens;
    return s;
  }
  auto t0 = std::chrono::steady_clock::now();
  const int64_t terms = batch.size > 0 ? loss_terms(batch) : 0;
  const bool finite = std::isfinite(loss);
  Generator& gen = default_generator();
  constexpr size_t kFields = 7;
  std::vector<double> all =
      comm_.all_gather({finite ? 0.0 : 1.0, static_cast<double>(terms), finite ? loss * terms : 0.0,
                        static_cast<double>(batch.size), static_cast<double>(local_tokens),
                        ::mixlab::interrupted() ? 1.0 : 0.0, static_cast<double>(gen.counter())});
  double total_terms = 0, weighted = 0, counter = 0;
  int bad_rank = -1;
  any_interrupted_ = false;
  for (int r = 0; r < size(); ++r) {
    const double* f = &all[static_cast<size_t>(r) * kFields];
    if (f[0] != 0.0 && bad_rank < 0) bad_rank = r;
    total_terms += f[1];
    weighted += f[2];  // in rank order, in float64: the same sum on every rank
    s.examples += static_cast<int64_t>(f[3]);
    s.tokens += static_cast<int64_t>(f[4]);
    any_interrupted_ = any_interrupted_ || f[5] != 0.0;
    counter = std::max(counter, f[6]);
  }
  // A rank with an empty share drew no dropout seeds: all continue from the furthest counter.
  gen.set_state(gen.seed(), static_cast<uint64_t>(counter));
  share_seconds_ += seconds_since(t0);
  ++share_calls_;
  if (bad_rank >= 0) {
    agreed_failure_ = true;
    if (!is_root()) comm_.exit_after_peer_failure();
    fail("training diverged: the loss is not finite at step ", step, " on rank ", bad_rank, " of ",
         size(), "; lower --lr or raise --warmup");
  }
  s.loss = total_terms > 0 ? weighted / total_terms : 0.0;
  s.weight = total_terms > 0 ? static_cast<double>(terms) / total_terms : 0.0;
  return s;
}

void DataParallel::all_reduce_gradients(const std::vector<Tensor>& params) {
  if (!active()) return;
  auto t0 = std::chrono::steady_clock::now();
  NoGradGuard no_grad;
  size_t first = 0;
  int64_t total = 0;
  while (first < params.size()) {
    // A bucket: consecutive parameters up to bucket_floats (at least one parameter).
    size_t last = first;
    int64_t floats = 0;
    while (last < params.size() &&
           (last == first || floats + params[last].numel() <= bucket_floats))
      floats += params[last++].numel();
    std::vector<Tensor> pieces;
    for (size_t i = first; i < last; ++i) {
      const Tensor& p = params[i];
      Tensor g = p.grad();
      pieces.push_back(g.defined() ? reshape(g.to(DType::F32).contiguous(), {p.numel()})
                                   : Tensor::zeros({p.numel()}, DType::F32, p.device()));
    }
    Tensor flat = pieces.size() == 1 ? pieces.front().clone() : concat(pieces, 0);
    comm_.all_reduce_sum(flat);
    int64_t offset = 0;
    for (size_t i = first; i < last; ++i) {
      const Tensor& p = params[i];
      Tensor g = reshape(narrow(flat, 0, offset, p.numel()), p.shape());
      p.set_grad(p.dtype() == DType::F32 ? g : g.to(p.dtype()));
      offset += p.numel();
    }
    ++reduce_calls_;
    total += floats;
    first = last;
  }
  gradient_floats_ = total;
  ++reduce_steps_;
  reduce_seconds_ += seconds_since(t0);
}

bool DataParallel::interrupted() const {
  return active() ? any_interrupted_ : ::mixlab::interrupted();
}

void DataParallel::report(std::ostream& out) const {
  if (!active() || !is_root() || reduce_steps_ == 0) return;
  char line[320];
  std::snprintf(line, sizeof line,
                "data parallel: %d processes (%s); gradient all-reduce %.3f ms/step (%.1f "
                "call(s) of %.2f MB in all), loss agreement %.3f ms/step\n",
                size(), comm_.name().c_str(), 1e3 * reduce_seconds_ / reduce_steps_,
                static_cast<double>(reduce_calls_) / reduce_steps_, gradient_floats_ * 4e-6,
                1e3 * share_seconds_ / reduce_steps_);
  out << line;
}

}  // namespace mixlab
