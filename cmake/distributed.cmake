# Data-parallel training across processes (train/distributed/*.cpp, docs/distributed.md).
#
# MPI (OpenMPI from Debian's libopenmpi-dev) is optional: without it mixlab builds and trains in
# one process, and refuses to run when a launcher such as mpirun starts several copies of it.
# NCCL (the CUDA toolkit's) is used for GPU gradients when the CUDA backend is built and MPI is
# found: MPI launches the ranks and carries NCCL's bootstrap id and the small host-side messages.
#
# Expects the train layer's library `mixlab_train` to exist (and its sources to be in this
# directory's scope: the macros MIXLAB_HAVE_MPI / MIXLAB_HAVE_NCCL are set on
# train/distributed/*.cpp only).
set(MIXLAB_DISTRIBUTED_SOURCES
  train/distributed/distributed.cpp
  train/distributed/distributed_mpi.cpp
  train/distributed/distributed_nccl.cpp)
set(MIXLAB_WITH_MPI OFF)
set(MIXLAB_WITH_NCCL OFF)
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  set(MIXLAB_WITH_MPI ON)
  # Only the files that talk to MPI see its headers and the macro, so that the other objects
  # compile with the same flags whether MPI is installed or not (ccache shares them).
  set_property(SOURCE ${MIXLAB_DISTRIBUTED_SOURCES} APPEND PROPERTY
    COMPILE_DEFINITIONS MIXLAB_HAVE_MPI=1)
  set_property(SOURCE ${MIXLAB_DISTRIBUTED_SOURCES} APPEND PROPERTY
    INCLUDE_DIRECTORIES ${MPI_C_INCLUDE_DIRS})
  target_link_libraries(mixlab_train PRIVATE ${MPI_C_LIBRARIES})
  # FindMPI's launcher (/usr/bin/mpiexec on Debian); not /bin/mpirun, from which OpenMPI
  # would infer the installation prefix "/" and refuse to start.
  set(MIXLAB_MPIEXEC "${MPIEXEC_EXECUTABLE}")
  message(STATUS "mixlab: MPI ${MPI_C_VERSION} found: data-parallel training with mpirun "
                 "(launcher: ${MIXLAB_MPIEXEC})")
else()
  message(STATUS "mixlab: MPI not found: single-process training only "
                 "(install libopenmpi-dev and openmpi-bin for mpirun -np N)")
endif()

if(MIXLAB_WITH_CUDA AND MIXLAB_WITH_MPI)
  find_path(MIXLAB_NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include /usr/local/cuda/include)
  find_library(MIXLAB_NCCL_LIBRARY nccl
    HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(MIXLAB_NCCL_INCLUDE_DIR AND MIXLAB_NCCL_LIBRARY)
    set(MIXLAB_WITH_NCCL ON)
    set_property(SOURCE ${MIXLAB_DISTRIBUTED_SOURCES} APPEND PROPERTY
      COMPILE_DEFINITIONS MIXLAB_HAVE_NCCL=1)
    set_property(SOURCE ${MIXLAB_DISTRIBUTED_SOURCES} APPEND PROPERTY
      INCLUDE_DIRECTORIES ${MIXLAB_NCCL_INCLUDE_DIR})
    target_link_libraries(mixlab_train PRIVATE ${MIXLAB_NCCL_LIBRARY})
    message(STATUS "mixlab: NCCL found (${MIXLAB_NCCL_LIBRARY}): GPU gradients all-reduced by NCCL")
  else()
    message(STATUS "mixlab: NCCL not found: GPU runs with several ranks stage gradients through "
                   "the host and MPI")
  endif()
elseif(MIXLAB_WITH_CUDA)
  message(STATUS "mixlab: NCCL not used (it needs MPI to launch and bootstrap the ranks)")
endif()

# The tool that checks the collectives (under mpirun) and drives the 2-rank training test.
if(MIXLAB_TESTS)
  add_executable(mixlab_distributed_check tests/distributed/distributed_check.cpp)
  mixlab_program(mixlab_distributed_check)
  if(TARGET mixlab)
    add_dependencies(mixlab_distributed_check mixlab)
  endif()
  if(MIXLAB_WITH_MPI)
    set(mixlab_mpirun "${MIXLAB_MPIEXEC}")
  else()
    set(mixlab_mpirun "")
  endif()
  add_test(NAME "distributed: 2 MPI ranks equal 1 rank with twice the batch, and resume"
    COMMAND mixlab_distributed_check training --mixlab $<TARGET_FILE:mixlab>
            --mpirun "${mixlab_mpirun}" --work ${CMAKE_CURRENT_BINARY_DIR}/distributed-test)
  add_test(NAME "distributed: MPI collectives (broadcast, ordered all-reduce, failure agreement)"
    COMMAND mixlab_distributed_check collectives-under-mpirun --mpirun "${mixlab_mpirun}"
            --self $<TARGET_FILE:mixlab_distributed_check>)
  if(MIXLAB_WITH_NCCL)  # one rank, one GPU (tests/gpu/check.sh runs it where a GPU is lent)
    add_test(NAME "distributed: NCCL collectives on one GPU"
      COMMAND mixlab_distributed_check collectives-under-mpirun --mpirun "${mixlab_mpirun}"
              --np 1 --device cuda --self $<TARGET_FILE:mixlab_distributed_check>)
    set_tests_properties("distributed: NCCL collectives on one GPU"
      PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
  endif()
  set_tests_properties(
    "distributed: 2 MPI ranks equal 1 rank with twice the batch, and resume"
    "distributed: MPI collectives (broadcast, ordered all-reduce, failure agreement)"
    PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
