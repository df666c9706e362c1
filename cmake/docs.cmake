# The documentation test reads the source tree (tests/test_docs.cpp): only that file gets the
# source directory's path, so other objects stay independent of the checkout's location.
if(MIXLAB_TESTS)
  set_property(SOURCE tests/test_docs.cpp APPEND PROPERTY
    COMPILE_DEFINITIONS MIXLAB_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
endif()
