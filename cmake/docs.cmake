# The documentation test and the reference backend's line budget read the source tree
# (tests/test_docs.cpp, tests/test_reference_backend.cpp): only those files get the source
# directory's path, so other objects stay independent of the checkout's location.
if(MIXLAB_TESTS)
  set_property(SOURCE tests/test_docs.cpp tests/test_reference_backend.cpp APPEND PROPERTY
    COMPILE_DEFINITIONS MIXLAB_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
endif()
