# examples/: short programs against the library, each built as example_<name> and run by CTest,
# which checks both the exit status and the lines the program's header comment promises.
file(GLOB MIXLAB_EXAMPLE_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/examples/*.cpp)
foreach(src ${MIXLAB_EXAMPLE_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(example_${name} ${src})
  target_link_libraries(example_${name} PRIVATE mixlab::mixlab)  # as an installed user would
  target_compile_options(example_${name} PRIVATE ${MIXLAB_WARNINGS})
endforeach()

# mixlab_example_test(NAME ARGS... EXPECT regex...): runs example_NAME in its own folder.
function(mixlab_example_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "ARGS;EXPECT")
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/example-runs/${name})
  file(MAKE_DIRECTORY ${dir})
  list(JOIN arg_EXPECT "|||" expect)  # one argument; the driver splits it again
  add_test(NAME "example: ${name}"
    COMMAND ${CMAKE_COMMAND} "-DPROGRAM=$<TARGET_FILE:example_${name}>" "-DARGS=${arg_ARGS}"
      "-DEXPECT=${expect}" -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/run_and_match.cmake
    WORKING_DIRECTORY ${dir})
endfunction()

if(MIXLAB_TESTS)
  mixlab_example_test(autograd EXPECT "L = -8\n"
    "dL/da = 6, dL/db = -4, dL/dc = -2, dL/df = 4\n"
    "step 400: loss 0\\.00"
    "xor\\(0,0\\) = 0, xor\\(0,1\\) = 1, xor\\(1,0\\) = 1, xor\\(1,1\\) = 0")
  mixlab_example_test(train_classifier ARGS classifier.safetensors attention
    EXPECT "epoch 3: train loss [0-9.]+, test accuracy (0\\.9|1\\.0)"
    "attention: test accuracy ([0-9.]+); reloaded from classifier\\.safetensors: ([0-9.]+)")
  mixlab_example_test(custom_mixer ARGS mean_pool.safetensors
    EXPECT "mixers now include: attention .* mean-pool\n"
    "mean-pool: test accuracy ([0-9.]+); reloaded from mean_pool\\.safetensors: ([0-9.]+)")
endif()
