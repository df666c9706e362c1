# The find_package test (cmake -P; arguments from cmake/install.cmake): installs the build tree
# into a fresh prefix, then builds tests/consumer against that prefix twice, with CMake's
# find_package(mixlab) and with pkg-config's mixlab.pc, and runs both programs. Passes when each
# lists a mixer from every mixer family's file (so no object was dropped without
# --whole-archive) and trains (its loss falls; the program checks that and exits 1 otherwise).
cmake_minimum_required(VERSION 3.25)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# One mixer registered by each file of nn/mixers/ (builtin.cpp's list).
set(expected_mixers attention synth-random mlp-mixer resmlp ffonly external fnet gmlp hcsa
  lightconv linformer)
function(check_consumer program label)
  run(${program} fnet)
  message(STATUS "${label}: ${run_output}")
  string(REGEX MATCH "mixers:[^\n]*" listed "${run_output}")
  foreach(name IN LISTS expected_mixers)
    if(NOT listed MATCHES " ${name}( |$)")
      message(FATAL_ERROR "${label}: mixer '${name}' is missing from the installed library's "
        "registry: ${listed}")
    endif()
  endforeach()
  if(NOT run_output MATCHES "mixer fnet: loss [0-9.]+ -> [0-9.]+")
    message(FATAL_ERROR "${label}: no training line in: ${run_output}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/mixlab/nn/models.h)
  message(FATAL_ERROR "the install has no include/mixlab/nn/models.h")
endif()

# 1. CMake: find_package(mixlab) from the prefix only.
set(launcher)
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake-build -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} ${launcher})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
check_consumer(${WORK_DIR}/cmake-build/consumer "find_package")

# 2. pkg-config: the same program from one compiler line.
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB pc_file ${prefix}/lib*/pkgconfig/mixlab.pc ${prefix}/lib/*/pkgconfig/mixlab.pc)
if(NOT pc_file)
  message(FATAL_ERROR "the install has no mixlab.pc")
endif()
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(${PKG_CONFIG} --cflags --libs mixlab)
string(STRIP "${run_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${LAUNCHER} ${CXX} -O1 ${CONSUMER_DIR}/main.cpp -o ${WORK_DIR}/consumer-pc ${flags})
check_consumer(${WORK_DIR}/consumer-pc "pkg-config")
