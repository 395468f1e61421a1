# Warnings for strider's own targets (not for users of the installed package).
add_library(strider_warnings INTERFACE)
target_compile_options(strider_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wconversion -Wno-sign-conversion>)
