// Fault injection for the fault tests (tests/test_faults.cpp), read from the environment by the
// atomic file writer (io/atomic_file.cpp) and the metrics log (io/run_log.cpp). Unset, they
// cost one look-up per file (or metrics row) written.
//
//   MIXLAB_FAULT_ENOSPC=NAME                 writing a file named NAME (its last path component;
//                                            "*" for every file) fails like a full disk: the
//                                            first 4 KiB reach the temporary file, then write(2)
//                                            reports ENOSPC. A file appended to (a metrics
//                                            log) fails at every row.
//   MIXLAB_FAULT_PAUSE_BEFORE_RENAME=NAME:MS writing NAME sleeps MS milliseconds after the
//                                            temporary file is complete and fsync'ed and before
//                                            it is renamed, so a test can kill the process
//                                            inside a checkpoint write.
#pragma once
#include <cstdint>
#include <string>

namespace mixlab::fault_hooks {

// Bytes a write of `path` may put on disk before failing with ENOSPC; -1 when no fault applies.
int64_t enospc_limit(const std::string& path);

// Sleeps when a pause before the rename of `path` is asked for.
void pause_before_rename(const std::string& path);

}  // namespace mixlab::fault_hooks
