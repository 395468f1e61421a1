// Catch2's implementation (CATCH_CONFIG_RUNNER), compiled once for all the test binaries: it is most of
// a test main's compile time (about 30 s, and 50-75 s under a sanitizer, on a 2-core machine), and the
// sanitizer builds compile it uninstrumented (tests/CMakeLists.txt): they check strider, not Catch2.
#define CATCH_CONFIG_RUNNER
#include "catch_session.hpp"

#include <catch2/catch.hpp>

int strider::testing::run_catch_session(int argc, char** argv, const char* report_path) {
  Catch::Session session;
  const int failed = session.applyCommandLine(argc, argv);
  if (failed != 0) return failed;
  if (report_path != nullptr) session.configData().outputFilename = report_path;
  return session.run();
}
