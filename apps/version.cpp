// `mixlab --version`. The definitions come from cmake/version.cmake, for this file alone.
#include "apps/cli_style.h"
#include "backends/backend.h"
#include "backends/cpu/simd/kernel_registers.h"
#include "mixlab_revision.h"  // generated at every build: MIXLAB_GIT_REVISION

namespace mixlab::app {

std::string version_string() {
#ifdef MIXLAB_HAVE_CUDA
  const char* cuda = "CUDA on";
#else
  const char* cuda = "CUDA off";
#endif
  std::string type = MIXLAB_BUILD_TYPE;
  return std::string("mixlab ") + MIXLAB_VERSION + " (git " + MIXLAB_GIT_REVISION + ", " +
         (type.empty() ? "default" : type) + " build, CPU kernels " + cpu::kernel_registers() +
         ", " + cuda + ", devices " + built_devices() + ")";
}

}  // namespace mixlab::app
