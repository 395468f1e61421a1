# FindNCCL: NCCL ships no CMake config. Defines NCCL::nccl (imported) from nccl.h and libnccl.so, or a
# bare libnccl.so.2 (what NVIDIA's Python wheel ships) with the headers found elsewhere; NCCL_VERSION
# from nccl.h, checked against a version asked of find_package.
# Hints: NCCL_ROOT, CUDAToolkit_ROOT, /usr/local/cuda.
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
  PATHS /usr/local/cuda /usr PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
  PATHS /usr/local/cuda /usr PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR[ \t]+([0-9]+).*" "\\1" _maj "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_MINOR[ \t]+([0-9]+).*" "\\1" _min "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_PATCH[ \t]+([0-9]+).*" "\\1" _pat "${_nccl_ver}")
  set(NCCL_VERSION "${_maj}.${_min}.${_pat}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}" INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
