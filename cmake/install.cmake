# Install and consume: `cmake --install build --prefix P` puts the headers under
# P/include/mixlab/<folder>/*.h (the source tree's layout), the libraries under P/lib, the `mixlab`
# app under P/bin, and lets another project write
#
#   find_package(mixlab REQUIRED)                        # P in CMAKE_PREFIX_PATH
#   target_link_libraries(app PRIVATE mixlab::mixlab)    # then #include <mixlab/nn/models.h>
#
# or, without CMake, `pkg-config --cflags --libs mixlab` (P/lib/pkgconfig/mixlab.pc).
#
# Both include styles work for a consumer: <mixlab/nn/models.h> (recommended: no clash with a
# consumer's own core/ or nn/ folders) and "nn/models.h" (the style inside the tree, which the
# installed headers use among themselves), since both P/include and P/include/mixlab are on the
# interface.
#
# No --whole-archive is needed: the mixers are not registered by static initialisers but by
# MixerRegistry::instance() calling register_builtin_mixers() (nn/mixers/builtin.cpp) on first
# use, a chain of ordinary calls, so the linker pulls every mixer's object out of the archive as
# soon as the program uses the registry (tests/consumer checks that every mixer is there).
#
# Libraries: MIXLAB_INSTALL_LIBRARIES, one per layer (cmake/layers.cmake), highest layer first
# (pkg-config's static link order); mixlab::mixlab links every one, and each is exported as
# mixlab::<name>.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MIXLAB_INSTALL_LIBRARIES mixlab_train mixlab_nn mixlab_autograd mixlab_backends
  mixlab_io mixlab_core)
set(MIXLAB_HEADER_FOLDERS core backends io autograd nn train)
set(MIXLAB_PACKAGE_VERSION 0.1.0)
set(MIXLAB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mixlab)

# The library targets name paths of this machine's source tree and the OpenBLAS found here; an
# installed copy must not. Paths inside the tree become build-only, the installed include folders
# are added, and OpenBLAS is named through mixlab::openblas, which mixlabConfig.cmake creates
# from the consumer's own OpenBLAS (find_dependency).
function(mixlab_make_exportable target)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  set(exported)
  foreach(dir IN LISTS dirs)
    if(dir MATCHES "^\\$<")  # already a generator expression: the target knows what it wants
      list(APPEND exported "${dir}")
    elseif(dir MATCHES "^${CMAKE_SOURCE_DIR}(/|$)" OR dir MATCHES "^${CMAKE_BINARY_DIR}(/|$)"
           OR dir STREQUAL OPENBLAS_INCLUDE_DIR)  # cblas.h: no installed header includes it
      list(APPEND exported "$<BUILD_INTERFACE:${dir}>")
    elseif(dir)
      list(APPEND exported "${dir}")
    endif()
  endforeach()
  list(APPEND exported "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/mixlab>")
  set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${exported}")

  get_target_property(libs ${target} INTERFACE_LINK_LIBRARIES)
  if(libs AND OPENBLAS_LIBRARY)
    string(REPLACE "${OPENBLAS_LIBRARY}"
      "$<BUILD_INTERFACE:${OPENBLAS_LIBRARY}>;$<INSTALL_INTERFACE:mixlab::openblas>" libs "${libs}")
    set_property(TARGET ${target} PROPERTY INTERFACE_LINK_LIBRARIES "${libs}")
  endif()
  set_property(TARGET ${target} PROPERTY EXPORT_NAME ${target})
endfunction()

foreach(lib IN LISTS MIXLAB_INSTALL_LIBRARIES)
  mixlab_make_exportable(${lib})
endforeach()

# mixlab::mixlab: the one name consumers use, whatever the libraries are.
add_library(mixlab_all INTERFACE)
add_library(mixlab::mixlab ALIAS mixlab_all)  # the same name inside this tree (examples/)
set_property(TARGET mixlab_all PROPERTY EXPORT_NAME mixlab)
target_link_libraries(mixlab_all INTERFACE ${MIXLAB_INSTALL_LIBRARIES})
target_compile_features(mixlab_all INTERFACE cxx_std_20)  # the headers are C++20

install(TARGETS mixlab_all ${MIXLAB_INSTALL_LIBRARIES} EXPORT mixlabTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET mixlab)
  install(TARGETS mixlab OPTIONAL RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(folder IN LISTS MIXLAB_HEADER_FOLDERS)
  install(DIRECTORY ${folder} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mixlab
    FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh" PATTERN "*.def")
endforeach()
install(EXPORT mixlabTargets NAMESPACE mixlab:: DESTINATION ${MIXLAB_CMAKE_DIR})

configure_package_config_file(cmake/mixlabConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mixlabConfig.cmake INSTALL_DESTINATION ${MIXLAB_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mixlabConfigVersion.cmake
  VERSION ${MIXLAB_PACKAGE_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mixlabConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/mixlabConfigVersion.cmake DESTINATION ${MIXLAB_CMAKE_DIR})

# pkg-config: static archives, so Libs lists the libraries in link order and Requires the
# dependencies' own .pc files (all of which Debian ships).
set(MIXLAB_PC_LIBS "")
foreach(lib IN LISTS MIXLAB_INSTALL_LIBRARIES)
  string(APPEND MIXLAB_PC_LIBS " -l${lib}")
endforeach()
set(MIXLAB_PC_CFLAGS "")
set(MIXLAB_PC_CUDA_LIBS "")
if(MIXLAB_WITH_CUDA)
  set(MIXLAB_PC_CFLAGS " -DMIXLAB_HAVE_CUDA=1")
  set(MIXLAB_PC_CUDA_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcufft")
endif()
# Relocatable: the prefix is found from where the .pc file lies (pkg-config's ${pcfiledir}).
file(RELATIVE_PATH MIXLAB_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/mixlab.pc.in ${CMAKE_CURRENT_BINARY_DIR}/mixlab.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mixlab.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The find_package test: install into a temporary prefix, build tests/consumer against it with
# CMake and with pkg-config, run both and check what they print. Not in sanitizer or fuzz builds:
# their libraries need the sanitizer runtimes, which a plain consumer does not link.
if(MIXLAB_TESTS AND NOT MIXLAB_SANITIZE AND NOT MIXLAB_FUZZ)
  add_test(NAME "install: an out-of-tree project builds with find_package(mixlab) and pkg-config"
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR}
      -DWORK_DIR=${CMAKE_BINARY_DIR}/consumer-test
      -DCONSUMER_DIR=${CMAKE_SOURCE_DIR}/tests/consumer
      -DCXX=${CMAKE_CXX_COMPILER} -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
      -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
      -P ${CMAKE_SOURCE_DIR}/tests/consumer/run_consumer_test.cmake)
  set_tests_properties(
    "install: an out-of-tree project builds with find_package(mixlab) and pkg-config"
    PROPERTIES RESOURCE_LOCK mixlab_install TIMEOUT 600)
endif()
