# The documentation test and the reference backend's line budget read the source tree
# (tests/test_docs.cpp, tests/test_reference_backend.cpp): only those files get the source
# directory's path, so other objects stay independent of the checkout's location.
if(MIXLAB_TESTS)
  set_property(SOURCE tests/test_docs.cpp tests/test_reference_backend.cpp APPEND PROPERTY
    COMPILE_DEFINITIONS MIXLAB_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
endif()

# Every command in the README's sh blocks runs as written, at small sizes, with its effect
# checked (tests/readme_commands.sh).
if(MIXLAB_TESTS AND TARGET mixlab)
  add_test(NAME "docs: every README command runs as written (small sizes)"
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/readme_commands.sh $<TARGET_FILE:mixlab>
            ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties("docs: every README command runs as written (small sizes)"
    PROPERTIES TIMEOUT 600)
endif()
