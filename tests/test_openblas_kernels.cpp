// The choice of OpenBLAS kernels the command line makes when OpenBLAS itself fell back to its
// generic ones (backends/cpu/openblas_kernels.h). The re-exec is not run here: the test binary
// keeps OpenBLAS's own pick, whatever the machine.
#include <doctest/doctest.h>

#include "backends/cpu/openblas_kernels.h"

using namespace mixlab;

TEST_CASE("openblas kernels: a generic fallback is replaced by the CPU's best family") {
  CHECK(better_openblas_coretype("Prescott", true, true) == "SkylakeX");
  CHECK(better_openblas_coretype("Prescott", false, true) == "Haswell");
  CHECK(better_openblas_coretype("Nehalem", false, true) == "Haswell");
  CHECK(better_openblas_coretype("Sandybridge", true, true) == "SkylakeX");
}

TEST_CASE("openblas kernels: a deliberate pick or a CPU without AVX2 is left alone") {
  CHECK(better_openblas_coretype("Prescott", false, false) == "");
  CHECK(better_openblas_coretype("SkylakeX", true, true) == "");
  CHECK(better_openblas_coretype("Haswell", true, true) == "");  // e.g. a user's own override
  CHECK(better_openblas_coretype("Zen", false, true) == "");
  CHECK(better_openblas_coretype("Cooperlake", true, true) == "");
}
