# Export and interop tests: the old-format checkpoint fixture's path for tests/test_export.cpp,
# the `mixlab export` round trip through the app, and the optional PyTorch comparison.
set_property(SOURCE tests/test_export.cpp APPEND PROPERTY
  COMPILE_DEFINITIONS MIXLAB_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
if(MIXLAB_TESTS AND TARGET mixlab)
  add_test(NAME "export: mixlab export round trip through every command that takes a checkpoint"
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/export_roundtrip.sh $<TARGET_FILE:mixlab>)
endif()
