# Run by the mixlab_git_revision target (cmake -P): writes OUTPUT defining MIXLAB_GIT_REVISION,
# touching it only when the revision changed.
execute_process(COMMAND git -C ${SOURCE_DIR} describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT revision)
  set(revision "unknown")
endif()
set(content "#define MIXLAB_GIT_REVISION \"${revision}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUTPUT} "${content}")
endif()
