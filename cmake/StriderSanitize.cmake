# STRIDER_SANITIZE: "address,undefined" or "thread" (or empty). Applied to every C/C++ target built
# here (CUDA code is built without sanitizers; the sanitizer builds turn CUDA off).
if(STRIDER_SANITIZE)
  if(STRIDER_SANITIZE MATCHES "thread" AND STRIDER_SANITIZE MATCHES "address")
    message(FATAL_ERROR "STRIDER_SANITIZE: thread cannot be combined with address")
  endif()
  if(NOT STRIDER_SANITIZE MATCHES "^(address|undefined|thread)(,(address|undefined|thread))*$")
    message(FATAL_ERROR "STRIDER_SANITIZE='${STRIDER_SANITIZE}': use 'address,undefined' or 'thread'")
  endif()
  foreach(flag -fsanitize=${STRIDER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${flag}>)
  endforeach()
  add_link_options(-fsanitize=${STRIDER_SANITIZE})
endif()
