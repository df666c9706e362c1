#include "backends/cpu/openblas_kernels.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>

#include "core/settings.h"

namespace mixlab {

std::string better_openblas_coretype(const std::string& corename, bool has_avx512f_bw,
                                     bool has_avx2) {
  // OpenBLAS's names for its kernel families without AVX2 (Sandybridge has AVX, not AVX2/FMA).
  static const char* kGeneric[] = {"Prescott", "Core2", "Penryn",     "Dunnington",
                                   "Nehalem",  "Atom",  "Sandybridge"};
  bool generic = false;
  for (const char* name : kGeneric) generic = generic || corename == name;
  if (!generic) return "";
  if (has_avx512f_bw) return "SkylakeX";
  if (has_avx2) return "Haswell";
  return "";
}

void reexec_with_better_openblas_kernels(char** argv) {
#if defined(__x86_64__) && defined(__linux__)
  // The marker also stops a second attempt should OpenBLAS ignore the override.
  if (setting(Setting::OpenblasCoretype) || setting(Setting::KeepOpenblasCore)) return;
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  std::string core = better_openblas_coretype(openblas_get_corename(), avx512, avx2);
  if (core.empty()) return;
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  setenv("MIXLAB_KEEP_OPENBLAS_CORE", "1", 1);
  execv("/proc/self/exe", argv);
  // execv returned: it failed. Carry on with OpenBLAS's own kernels.
  unsetenv("OPENBLAS_CORETYPE");
#else
  (void)argv;
#endif
}

}  // namespace mixlab
