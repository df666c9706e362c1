# libFuzzer targets (fuzz/*.cpp): -DMIXLAB_FUZZ=ON with clang (Debian's clang and
# libclang-rt-dev: scripts/install-deps.sh --with-clang). Every object of the project is built
# with coverage instrumentation (-fsanitize=fuzzer-no-link), and usually with
# -DMIXLAB_SANITIZE=address,undefined too, so that a fuzz input that corrupts memory or hits
# undefined behaviour is a crash. The tests still link and run in such a build.
# scripts/fuzz.sh runs the targets (a smoke run in CI, longer campaigns by hand).
option(MIXLAB_FUZZ "Build the libFuzzer targets in fuzz/ (clang only)" OFF)

if(MIXLAB_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MIXLAB_FUZZ needs clang++ (CXX=clang++); found ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
  set(MIXLAB_FUZZ_TARGETS "")
  function(mixlab_add_fuzz_targets)
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.cpp)
    foreach(src ${sources})
      get_filename_component(name ${src} NAME_WE)
      add_executable(${name} ${src})
      if(name STREQUAL "fuzz_mixer_spec")  # checks options with the command line's own parser
        target_link_libraries(${name} PRIVATE mixlab_cli)
      endif()
      mixlab_program(${name})  # the whole engine, and the source tree's include path
      target_link_libraries(${name} PRIVATE CLI11::CLI11)
      target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    endforeach()
  endfunction()
  # After CMakeLists.txt has defined mixlab_engine and mixlab_cli.
  cmake_language(DEFER CALL mixlab_add_fuzz_targets)
endif()
