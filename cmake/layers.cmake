# One static library per layer, each linked only to the layers below it (cmake/layer_table.cmake
# holds the table and the picture). A layer's headers reach the compiler through a folder of its
# own, <build>/layer_include/<layer>/, that holds a single link <layer> -> the source folder; a
# library gets those folders for itself and, through its PUBLIC links, for the layers below. So
# `#include "train/json.h"` in nn/ finds nothing and the build fails, and
# cmake/check_layers.cmake (a CTest test) says which line broke the rule.
include(${CMAKE_CURRENT_LIST_DIR}/layer_table.cmake)

# mixlab_layer(NAME FOLDER SOURCES... [LINKS libs...]): the library of one layer.
function(mixlab_layer name folder)
  cmake_parse_arguments(PARSE_ARGV 2 L "" "" "SOURCES;LINKS")
  add_library(${name} STATIC ${L_SOURCES})
  set(root ${CMAKE_BINARY_DIR}/layer_include/${folder})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${folder} SYMBOLIC)
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${root}>)
  target_link_libraries(${name} PUBLIC ${L_LINKS})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MIXLAB_WARNINGS}>)
endfunction()

file(GLOB MIXLAB_CORE_SOURCES CONFIGURE_DEPENDS core/*.cpp)
mixlab_layer(mixlab_core core SOURCES ${MIXLAB_CORE_SOURCES} LINKS Threads::Threads)

file(GLOB_RECURSE MIXLAB_BACKEND_SOURCES CONFIGURE_DEPENDS backends/*.cpp)
mixlab_layer(mixlab_backends backends SOURCES ${MIXLAB_BACKEND_SOURCES} LINKS mixlab_core)
# OpenBLAS and FFTW are the CPU backend's business: their headers stay private to it.
target_include_directories(mixlab_backends PRIVATE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(mixlab_backends PRIVATE ${OPENBLAS_LIBRARY} PkgConfig::FFTW3)
# The CPU kernels may reorder float sums so that reductions vectorise (results stay a pure
# function of the binary, the inputs and the thread count); NaN and infinity semantics are kept,
# and tests/test_ops_non_finite.cpp holds the elementwise kernels and the reductions to the
# reference's NaNs and infinities (a reordered product can overflow or drop a NaN).
file(GLOB_RECURSE MIXLAB_CPU_KERNELS CONFIGURE_DEPENDS backends/cpu/*.cpp)
set(MIXLAB_CPU_KERNEL_FLAGS -fno-math-errno -fno-trapping-math -fassociative-math -fno-signed-zeros)
# MIXLAB_NATIVE (CMakeLists.txt): this machine's vector width. Results stay a pure function of
# the binary, the inputs and the thread count; a binary built elsewhere may round differently.
include(CheckCXXCompilerFlag)
if(MIXLAB_CPU_ARCH)
  string(MAKE_C_IDENTIFIER "MIXLAB_HAS_MARCH_${MIXLAB_CPU_ARCH}" has_arch)
  check_cxx_compiler_flag(-march=${MIXLAB_CPU_ARCH} ${has_arch})
  if(NOT ${has_arch})
    message(FATAL_ERROR "MIXLAB_CPU_ARCH=${MIXLAB_CPU_ARCH}: the compiler does not take "
                        "-march=${MIXLAB_CPU_ARCH}")
  endif()
  list(APPEND MIXLAB_CPU_KERNEL_FLAGS -march=${MIXLAB_CPU_ARCH})
  message(STATUS "mixlab: CPU kernels for -march=${MIXLAB_CPU_ARCH}")
elseif(MIXLAB_NATIVE)
  check_cxx_compiler_flag(-march=native MIXLAB_HAS_MARCH_NATIVE)
  if(MIXLAB_HAS_MARCH_NATIVE)
    list(APPEND MIXLAB_CPU_KERNEL_FLAGS -march=native)
  endif()
endif()
if(MIXLAB_EMULATE_LANES16)
  list(APPEND MIXLAB_CPU_KERNEL_FLAGS -DMIXLAB_EMULATE_LANES16=1)
  message(STATUS "mixlab: CPU register kernels in 16 emulated lanes (a test build)")
endif()
set_source_files_properties(${MIXLAB_CPU_KERNELS} PROPERTIES COMPILE_OPTIONS
  "${MIXLAB_CPU_KERNEL_FLAGS}")
if(MIXLAB_WITH_CUDA)
  file(GLOB_RECURSE MIXLAB_CUDA_SOURCES CONFIGURE_DEPENDS backends/cuda/*.cu)
  target_sources(mixlab_backends PRIVATE ${MIXLAB_CUDA_SOURCES})
  # Hopper (H100/H200) natively, plus PTX so newer GPUs JIT it.
  # CUDA 17 explicitly: unset, CMake applies CXX_STANDARD (20) to .cu files, and CMake < 3.26
  # knows no C++20 flag for nvcc (generation fails).
  set_target_properties(mixlab_backends PROPERTIES CUDA_ARCHITECTURES "90-real;90-virtual"
    CUDA_SEPARABLE_COMPILATION OFF CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_definitions(mixlab_backends PUBLIC MIXLAB_HAVE_CUDA=1)
  target_compile_options(mixlab_backends PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)
  # cuda_backend.h (used by tests and benchmarks) includes the runtime's C API header.
  target_link_libraries(mixlab_backends PUBLIC CUDA::cudart PRIVATE CUDA::cublas CUDA::cufft)
endif()

file(GLOB MIXLAB_IO_SOURCES CONFIGURE_DEPENDS io/*.cpp)
mixlab_layer(mixlab_io io SOURCES ${MIXLAB_IO_SOURCES} LINKS mixlab_core)

file(GLOB_RECURSE MIXLAB_AUTOGRAD_SOURCES CONFIGURE_DEPENDS autograd/*.cpp)
mixlab_layer(mixlab_autograd autograd SOURCES ${MIXLAB_AUTOGRAD_SOURCES}
  LINKS mixlab_backends mixlab_io)

file(GLOB_RECURSE MIXLAB_NN_SOURCES CONFIGURE_DEPENDS nn/*.cpp)
mixlab_layer(mixlab_nn nn SOURCES ${MIXLAB_NN_SOURCES} LINKS mixlab_autograd)

file(GLOB_RECURSE MIXLAB_TRAIN_SOURCES CONFIGURE_DEPENDS train/*.cpp)
mixlab_layer(mixlab_train train SOURCES ${MIXLAB_TRAIN_SOURCES} LINKS mixlab_nn ZLIB::ZLIB)

file(GLOB_RECURSE MIXLAB_LAB_SOURCES CONFIGURE_DEPENDS lab/*.cpp)
mixlab_layer(mixlab_lab lab SOURCES ${MIXLAB_LAB_SOURCES} LINKS mixlab_train)

# The whole engine for programs built on it (the app, tests, benchmarks, examples). Mixers are
# registered by an explicit call (nn/mixers/builtin.cpp, reached from the registry), not by static
# constructors, so plain static linking keeps every one of them: no whole-archive linking.
add_library(mixlab_engine INTERFACE)
target_link_libraries(mixlab_engine INTERFACE mixlab_lab)

# Programs above the engine (apps, tests, benchmarks) see the whole source tree, first, so that
# every header has one path in them.
function(mixlab_program target)
  target_include_directories(${target} BEFORE PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${target} PRIVATE mixlab_engine)
  target_compile_options(${target} PRIVATE ${MIXLAB_WARNINGS})
endfunction()
