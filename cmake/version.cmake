# `mixlab --version`: the version, the git revision of the source tree (with "-dirty" when it had
# changes), the build type and whether CUDA is compiled in. The revision is read at every build
# (not only at configure time, which would go stale with each commit) into a generated header
# that is rewritten only when it changes, so only apps/version.cpp recompiles, and only then.
set(MIXLAB_VERSION "0.1.0")
set(MIXLAB_REVISION_HEADER ${CMAKE_CURRENT_BINARY_DIR}/generated/mixlab_revision.h)
add_custom_target(mixlab_git_revision
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}
    -DOUTPUT=${MIXLAB_REVISION_HEADER} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/write_revision.cmake
  BYPRODUCTS ${MIXLAB_REVISION_HEADER}
  COMMENT "Reading the git revision for mixlab --version")
set_property(SOURCE apps/version.cpp APPEND PROPERTY COMPILE_DEFINITIONS
  MIXLAB_VERSION="${MIXLAB_VERSION}" MIXLAB_BUILD_TYPE="${CMAKE_BUILD_TYPE}")
set_property(SOURCE apps/version.cpp APPEND PROPERTY INCLUDE_DIRECTORIES
  ${CMAKE_CURRENT_BINARY_DIR}/generated)
set_property(SOURCE apps/version.cpp APPEND PROPERTY OBJECT_DEPENDS ${MIXLAB_REVISION_HEADER})
# The mixlab_cli target (apps/version.cpp's) is defined after this file is included.
cmake_language(DEFER CALL add_dependencies mixlab_cli mixlab_git_revision)
