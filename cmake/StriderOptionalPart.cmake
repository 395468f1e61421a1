# Optional parts of the build, each chosen with an AUTO | ON | OFF cache setting (STRIDER_ENABLE_CUDA,
# STRIDER_BUILD_PYTHON, STRIDER_BUILD_LIBTORCH_EXAMPLE): one way to read the setting, and one way to
# decide once what the part needs was looked for.

# strider_part_mode(<setting> <out>): <out> becomes AUTO, ON or OFF for the setting's value (TRUE, 1
# and YES count as ON; FALSE, 0 and NO as OFF); anything else is a fatal error.
function(strider_part_mode setting out)
  string(TOUPPER "${${setting}}" value)
  if(value STREQUAL "AUTO")
    set(${out} AUTO PARENT_SCOPE)
  elseif(value MATCHES "^(ON|TRUE|1|YES)$")
    set(${out} ON PARENT_SCOPE)
  elseif(value MATCHES "^(OFF|FALSE|0|NO)$")
    set(${out} OFF PARENT_SCOPE)
  else()
    message(FATAL_ERROR "${setting}='${${setting}}': use AUTO, ON or OFF")
  endif()
endfunction()

# strider_part_decide(<setting> <mode> <part> <missing> <out>): <out> becomes ON when <missing> is
# empty. Otherwise <out> is OFF and, for AUTO, a status line says "<part> off: <missing> not found";
# for ON the configuration stops with "<setting>=ON but <missing> was not found".
function(strider_part_decide setting mode part missing out)
  if(missing STREQUAL "")
    set(${out} ON PARENT_SCOPE)
    return()
  endif()
  set(${out} OFF PARENT_SCOPE)
  if(mode STREQUAL "AUTO")
    message(STATUS "strider: ${part} off: ${missing} not found")
  else()
    message(FATAL_ERROR "${setting}=ON but ${missing} was not found")
  endif()
endfunction()
