# Decides STRIDER_HAS_LIBDEFLATE from STRIDER_WITH_LIBDEFLATE (AUTO | ON | OFF): the hdf5 engine
# inflates deflate-compressed chunks itself (src/io/chunk_inflate.cpp), with libdeflate (Debian:
# libdeflate-dev; about 1.7x zlib's inflate speed on float32 features) where found, else with zlib,
# which parallel HDF5 already depends on. Either is a private dependency of the library.
include(StriderOptionalPart)
set(STRIDER_HAS_LIBDEFLATE OFF)
strider_part_mode(STRIDER_WITH_LIBDEFLATE _strider_deflate_mode)
if(NOT _strider_deflate_mode STREQUAL "OFF")
  find_path(STRIDER_LIBDEFLATE_INCLUDE_DIR libdeflate.h)
  find_library(STRIDER_LIBDEFLATE_LIBRARY NAMES deflate)
  set(_strider_deflate_missing "")
  if(NOT STRIDER_LIBDEFLATE_INCLUDE_DIR OR NOT STRIDER_LIBDEFLATE_LIBRARY)
    set(_strider_deflate_missing "libdeflate (Debian: libdeflate-dev)")
  endif()
  strider_part_decide(STRIDER_WITH_LIBDEFLATE ${_strider_deflate_mode} "libdeflate (chunks inflate with zlib)"
                      "${_strider_deflate_missing}" STRIDER_HAS_LIBDEFLATE)
endif()
find_package(ZLIB REQUIRED)  # the inflater without libdeflate; the tests' deflate either way
