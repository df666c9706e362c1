# `mixlab --version`: the version, the git revision the build was configured from (with
# "-dirty" when the work tree had changes), the build type and whether CUDA is compiled in.
# Only apps/version.cpp gets these definitions, so no other object depends on the revision.
set(MIXLAB_VERSION "0.1.0")
execute_process(COMMAND git -C ${CMAKE_CURRENT_SOURCE_DIR} describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE MIXLAB_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT MIXLAB_GIT_REVISION)
  set(MIXLAB_GIT_REVISION "unknown")
endif()
set_property(SOURCE apps/version.cpp APPEND PROPERTY COMPILE_DEFINITIONS
  MIXLAB_VERSION="${MIXLAB_VERSION}" MIXLAB_GIT_REVISION="${MIXLAB_GIT_REVISION}"
  MIXLAB_BUILD_TYPE="${CMAKE_BUILD_TYPE}")
