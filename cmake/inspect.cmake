# `mixlab inspect` and `mixlab study`: their app tests run the real executable.
if(MIXLAB_TESTS)
  set_property(SOURCE tests/test_inspect_app.cpp tests/test_study_app.cpp APPEND PROPERTY
    COMPILE_DEFINITIONS MIXLAB_BINARY_DIR="${CMAKE_CURRENT_BINARY_DIR}")
endif()
