// Every environment variable mixlab reads, declared once here and read once, at first use, by
// core/settings.cpp (the one file that reads the environment). docs/design.md is the table of
// them with their defaults and purposes; a test checks that it lists each name below.
#pragma once

namespace mixlab {

enum class Setting {
  NumThreads,              // MIXLAB_NUM_THREADS: worker threads (core/parallel.cpp)
  Debug,                   // MIXLAB_DEBUG: kernel trace level (backends/tracing_backend.cpp)
  AttentionCore,           // MIXLAB_ATTENTION_CORE: fused or math (nn/attention_core.cpp)
  PlainAutograd,           // MIXLAB_PLAIN_AUTOGRAD: no gradient routing (autograd/)
  KeepOpenblasCore,        // MIXLAB_KEEP_OPENBLAS_CORE: no OpenBLAS kernel re-exec
  OpenblasCoretype,        // OPENBLAS_CORETYPE: OpenBLAS's own; set = mixlab leaves it alone
  FashionMnistDir,         // MIXLAB_FASHION_MNIST_DIR: where the Fashion-MNIST IDX files are
  G2pDir,                  // MIXLAB_G2P_DIR: where the CMUdict g2p files are
  FaultEnospc,             // MIXLAB_FAULT_ENOSPC: a file name whose writes fail as a full disk
  FaultPauseBeforeRename,  // MIXLAB_FAULT_PAUSE_BEFORE_RENAME: NAME:MS pause before a rename
  WorldSize,               // MIXLAB_WORLD_SIZE: processes, when not started by an MPI launcher
  Rank,                    // MIXLAB_RANK: this process's rank, likewise
  LocalRank,               // MIXLAB_LOCAL_RANK: its rank on this node, likewise
  OmpiWorldSize,           // OMPI_COMM_WORLD_SIZE: Open MPI's process count
  OmpiRank,                // OMPI_COMM_WORLD_RANK
  OmpiLocalRank,           // OMPI_COMM_WORLD_LOCAL_RANK
  PmiSize,                 // PMI_SIZE: MPICH's / Intel MPI's process count
  PmiRank,                 // PMI_RANK
  MpiLocalRankId,          // MPI_LOCALRANKID
  CudaVisibleDevices,      // CUDA_VISIBLE_DEVICES: set = the user chose the GPUs
  Term,                    // TERM: "dumb" = no progress redraws
  FaultSeed,               // MIXLAB_FAULT_SEED: the fault tests' seed (tests/test_faults.cpp)
  FuzzWriteSeeds,          // MIXLAB_FUZZ_WRITE_SEEDS: where a fuzzer writes its seed inputs
  kCount
};

struct SettingInfo {
  Setting setting;
  const char* name;          // the environment variable
  const char* default_text;  // what applies when it is unset
  const char* purpose;
};

// Every declared variable, in the order of Setting.
const SettingInfo (&setting_table())[static_cast<int>(Setting::kCount)];

// The variable's value as read from the environment at the first call of any of these (nullptr
// when unset or empty).
const char* setting(Setting which);

// The environment variable's name.
const char* setting_name(Setting which);

// Whether the variable is set to exactly "1".
bool setting_is_one(Setting which);

// Replaces the value read (nullptr: unset), for a test or an embedding program that sets it in
// its own process after the first read. Not for use while other threads read settings.
void override_setting(Setting which, const char* value);

}  // namespace mixlab
