# Decides STRIDER_HAS_PYTHON from STRIDER_BUILD_PYTHON (AUTO | ON | OFF): the pybind11 module
# `strider` needs Python 3's headers (Development.Module) and pybind11. AUTO builds it when both are
# found; ON fails loudly when either is missing.
#
# The interpreter is the system's /usr/bin/python3 unless Python3_EXECUTABLE names another one: a
# python3 first on PATH (pyenv, a virtual environment) would otherwise get a module built for it
# while the system's numpy, mpi4py and torch live with /usr/bin/python3.
#
# Sanitizer builds leave the module out: a library built with -fsanitize cannot be loaded into an
# uninstrumented interpreter.
include(StriderOptionalPart)
set(STRIDER_HAS_PYTHON OFF)
strider_part_mode(STRIDER_BUILD_PYTHON _strider_python_mode)
if(NOT _strider_python_mode STREQUAL "OFF" AND STRIDER_SANITIZE)
  if(_strider_python_mode STREQUAL "ON")
    message(FATAL_ERROR "STRIDER_BUILD_PYTHON=ON cannot be combined with STRIDER_SANITIZE")
  endif()
  message(STATUS "strider: Python module off in a sanitizer build")
elseif(NOT _strider_python_mode STREQUAL "OFF")
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python 3 interpreter the module is built for")
  endif()
  find_package(Python3 3.8 COMPONENTS Interpreter Development.Module QUIET)
  set(_strider_python_missing "")
  if(NOT Python3_Development.Module_FOUND)
    set(_strider_python_missing "Python 3's headers (Debian: python3-dev) for ${Python3_EXECUTABLE}")
  else()
    find_package(pybind11 2.6 CONFIG QUIET)
    if(NOT pybind11_FOUND)
      set(_strider_python_missing "pybind11 (Debian: pybind11-dev)")
    endif()
  endif()
  strider_part_decide(STRIDER_BUILD_PYTHON ${_strider_python_mode} "Python module" "${_strider_python_missing}"
                      STRIDER_HAS_PYTHON)
endif()
