# Export and interop tests: the old-format checkpoint fixture's path for tests/test_export.cpp,
# the `mixlab export` round trip through the app, and the optional PyTorch comparison (CTest
# SKIP when the python3 on PATH has no torch; torch is never installed by the project).
set_property(SOURCE tests/test_export.cpp APPEND PROPERTY
  COMPILE_DEFINITIONS MIXLAB_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
if(MIXLAB_TESTS AND TARGET mixlab)
  add_test(NAME "export: mixlab export round trip through every command that takes a checkpoint"
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/export_roundtrip.sh $<TARGET_FILE:mixlab>)
  set(torch_test
    "interop: torch.nn.Transformer decodes an exported translator as mixlab (skips without torch)")
  add_test(NAME ${torch_test}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/torch_interop_test.sh $<TARGET_FILE:mixlab>)
  set_tests_properties(${torch_test} PROPERTIES SKIP_RETURN_CODE 77)
endif()
