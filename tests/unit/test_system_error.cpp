// STRIDER_THROW_ERRNO: the one way a failed POSIX call becomes an error.
#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "strider/core/error.hpp"

using namespace strider;

TEST_CASE("STRIDER_THROW_ERRNO names the call, what the caller did and the errno text", "[core][error]") {
  bool thrown = false;
  try {
    STRIDER_THROW_ERRNO("pread(descriptor, ...)", "reading rows 3..9 of data.h5", ENOENT);
  } catch (const SystemError& error) {
    thrown = true;
    REQUIRE(error.context().call == "pread(descriptor, ...)");
    REQUIRE(error.context().code == ENOENT);
    REQUIRE(error.context().line > 0);
    REQUIRE(error.context().file.find("test_system_error.cpp") != std::string::npos);
    REQUIRE(error.reason() == "pread failed reading rows 3..9 of data.h5: No such file or directory");
  }
  REQUIRE(thrown);
}

TEST_CASE("STRIDER_THROW_ERRNO keeps the error number it was given, not errno at the throw", "[core][error]") {
  errno = 0;
  int code = 0;
  try {
    const int saved = EACCES;
    STRIDER_THROW_ERRNO("open(x)", "opening x", saved);
  } catch (const SystemError& error) {
    code = static_cast<int>(error.context().code);
  }
  REQUIRE(code == EACCES);
}
