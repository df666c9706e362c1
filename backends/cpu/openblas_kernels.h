// OpenBLAS picks its kernels from the CPU model. Debian's OpenBLAS 0.3.21 does not know some
// newer Xeons (seen: family 6 model 207) and falls back to its generic SSE3 "Prescott" kernels,
// 3-5x slower than its AVX-512 ones on the same machine. OPENBLAS_CORETYPE overrides the pick,
// but OpenBLAS reads it once, when the library loads, so the command line re-executes itself
// with it set (once) instead of asking every user to know this.
#pragma once
#include <string>

namespace mixlab {

// The OPENBLAS_CORETYPE that should replace OpenBLAS's pick `corename` on a CPU with these
// features, or "" to keep it. Only generic pre-AVX2 fallbacks are replaced: a pick OpenBLAS
// made on purpose (Zen, Haswell, SkylakeX, ...) is never second-guessed.
std::string better_openblas_coretype(const std::string& corename, bool has_avx512f_bw,
                                     bool has_avx2);

// When OpenBLAS fell back to generic kernels on a CPU that has better ones, and neither
// OPENBLAS_CORETYPE nor MIXLAB_KEEP_OPENBLAS_CORE is set, re-executes this program
// (/proc/self/exe) with the same arguments and OPENBLAS_CORETYPE set. Returns (doing nothing)
// otherwise, or when the re-exec fails. Call first thing in main(), before any thread starts.
void reexec_with_better_openblas_kernels(char** argv);

}  // namespace mixlab
