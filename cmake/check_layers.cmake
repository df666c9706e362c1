# The layering rule as a test: no file of a layer includes a header of a layer above it
# (cmake/layer_table.cmake). The build already fails on such an include (each library sees only
# its own and lower layers' headers); this check names every offending line at once.
#   cmake -DMIXLAB_SOURCE_DIR=<checkout> -P cmake/check_layers.cmake
if(NOT MIXLAB_SOURCE_DIR)
  get_filename_component(MIXLAB_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/layer_table.cmake)

set(violations "")
set(checked 0)
foreach(layer IN LISTS MIXLAB_LAYERS)
  file(GLOB_RECURSE files ${MIXLAB_SOURCE_DIR}/${layer}/*.h ${MIXLAB_SOURCE_DIR}/${layer}/*.cpp
    ${MIXLAB_SOURCE_DIR}/${layer}/*.cuh ${MIXLAB_SOURCE_DIR}/${layer}/*.cu
    ${MIXLAB_SOURCE_DIR}/${layer}/*.def)
  foreach(file IN LISTS files)
    math(EXPR checked "${checked} + 1")
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([a-z_]+)/.*" "\\1" target "${line}")
      list(FIND MIXLAB_LAYERS ${target} is_layer)
      list(FIND MIXLAB_LAYER_${layer}_SEES ${target} allowed)
      if(is_layer GREATER -1 AND allowed EQUAL -1)
        file(RELATIVE_PATH rel ${MIXLAB_SOURCE_DIR} ${file})
        string(STRIP "${line}" line)
        string(APPEND violations "  ${rel}: ${line}  (${layer}/ may include only: "
          "${MIXLAB_LAYER_${layer}_SEES})\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "includes of a higher layer (cmake/layer_table.cmake):\n${violations}")
endif()
message(STATUS "layers: ${checked} files, no include of a higher layer")
