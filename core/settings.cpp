// The one reader of the environment (core/settings.h).
#include "core/settings.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace mixlab {

namespace {
constexpr int kCount = static_cast<int>(Setting::kCount);

constexpr SettingInfo kTable[kCount] = {
    {Setting::NumThreads, "MIXLAB_NUM_THREADS", "the machine's hardware threads",
     "worker threads of the CPU kernels (also --threads)"},
    {Setting::Debug, "MIXLAB_DEBUG", "0",
     "1: a table of the kernel calls at exit; 2: also a line per call as it runs"},
    {Setting::AttentionCore, "MIXLAB_ATTENTION_CORE", "fused",
     "math: attention as its equation's separate ops, the reference for the fused core (also "
     "set_attention_core())"},
    {Setting::PlainAutograd, "MIXLAB_PLAIN_AUTOGRAD", "0",
     "1: the engine sums every gradient into fresh tensors, no gradient routing (also "
     "set_plain_autograd())"},
    {Setting::KeepOpenblasCore, "MIXLAB_KEEP_OPENBLAS_CORE", "unset",
     "1: keep the kernels OpenBLAS picked for this CPU; mixlab sets it itself when it "
     "re-executes with better ones, so that it does so once"},
    {Setting::OpenblasCoretype, "OPENBLAS_CORETYPE", "unset",
     "OpenBLAS's own choice of kernels; when set, mixlab leaves it as it is"},
    {Setting::FashionMnistDir, "MIXLAB_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist",
     "the folder of the four Fashion-MNIST IDX files"},
    {Setting::G2pDir, "MIXLAB_G2P_DIR", "data/g2p in the source tree",
     "the folder of the CMUdict g014b2b files"},
    {Setting::FaultEnospc, "MIXLAB_FAULT_ENOSPC", "unset",
     "fault test: writes of the file of this name (* = every file) fail as on a full disk"},
    {Setting::FaultPauseBeforeRename, "MIXLAB_FAULT_PAUSE_BEFORE_RENAME", "unset",
     "fault test: NAME:MS pauses MS milliseconds before the file NAME is renamed into place"},
    {Setting::WorldSize, "MIXLAB_WORLD_SIZE", "1",
     "processes in a data-parallel run started without an MPI launcher"},
    {Setting::Rank, "MIXLAB_RANK", "0", "this process's rank in such a run"},
    {Setting::LocalRank, "MIXLAB_LOCAL_RANK", "the rank",
     "this process's rank on its node in such a run (picks its GPU)"},
    {Setting::OmpiWorldSize, "OMPI_COMM_WORLD_SIZE", "unset", "Open MPI's process count"},
    {Setting::OmpiRank, "OMPI_COMM_WORLD_RANK", "unset", "Open MPI's rank"},
    {Setting::OmpiLocalRank, "OMPI_COMM_WORLD_LOCAL_RANK", "unset", "Open MPI's node-local rank"},
    {Setting::PmiSize, "PMI_SIZE", "unset", "MPICH's and Intel MPI's process count"},
    {Setting::PmiRank, "PMI_RANK", "unset", "MPICH's and Intel MPI's rank"},
    {Setting::MpiLocalRankId, "MPI_LOCALRANKID", "unset", "MPICH's node-local rank"},
    {Setting::CudaVisibleDevices, "CUDA_VISIBLE_DEVICES", "unset",
     "when set, a launched rank keeps the GPUs the user chose; else it sees its local rank's GPU"},
    {Setting::Term, "TERM", "unset", "dumb: progress lines are not redrawn in place"},
    {Setting::FaultSeed, "MIXLAB_FAULT_SEED", "a fixed seed",
     "the fault tests' seed (tests/test_faults.cpp), to replay a failure"},
    {Setting::FuzzWriteSeeds, "MIXLAB_FUZZ_WRITE_SEEDS", "unset",
     "a folder where the checkpoint fuzzer writes its seed inputs"},
};

constexpr bool table_in_order() {
  for (int i = 0; i < kCount; ++i)
    if (static_cast<int>(kTable[i].setting) != i) return false;
  return true;
}
static_assert(table_in_order(), "core/settings.cpp: kTable is in the order of Setting");

using Values = std::array<std::optional<std::string>, kCount>;

Values& values() {
  static Values read = [] {
    Values v;
    for (const SettingInfo& info : kTable)
      if (const char* env = std::getenv(info.name); env && *env)
        v[static_cast<int>(info.setting)] = env;
    return v;
  }();
  return read;
}
}  // namespace

const SettingInfo (&setting_table())[kCount] { return kTable; }

const char* setting(Setting which) {
  const auto& v = values()[static_cast<int>(which)];
  return v ? v->c_str() : nullptr;
}

const char* setting_name(Setting which) { return kTable[static_cast<int>(which)].name; }

bool setting_is_one(Setting which) {
  const char* v = setting(which);
  return v && std::strcmp(v, "1") == 0;
}

void override_setting(Setting which, const char* value) {
  auto& v = values()[static_cast<int>(which)];
  if (value && *value)
    v = value;
  else
    v.reset();
}

}  // namespace mixlab
