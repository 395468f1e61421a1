// MpiRuntime's check of the thread level MPI provides (require_thread_multiple), with the provided
// level stood in: every level below MPI_THREAD_MULTIPLE is refused with one line that names it and
// the level strider needs; MPI_THREAD_MULTIPLE passes.
#include <catch2/catch.hpp>
#include <string>

#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"

using namespace strider;

TEST_CASE("MPI thread level: anything below MPI_THREAD_MULTIPLE is refused with one clear line", "[mpi_runtime]") {
  const std::pair<int, std::string> below[] = {{MPI_THREAD_SINGLE, "MPI_THREAD_SINGLE"},
                                               {MPI_THREAD_FUNNELED, "MPI_THREAD_FUNNELED"},
                                               {MPI_THREAD_SERIALIZED, "MPI_THREAD_SERIALIZED"}};
  for (const auto& [level, name] : below) {
    CAPTURE(name);
    try {
      require_thread_multiple(level);
      FAIL("level " << name << " was accepted");
    } catch (const MpiError& error) {
      // What the app prints after "strider: error: ": one line naming both levels.
      const std::string line = error_message(error);
      REQUIRE(line.find('\n') == std::string::npos);
      REQUIRE_THAT(line,
                   Catch::Contains("MPI provides thread level " + name + " (" + std::to_string(level) + ")") &&
                       Catch::Contains("needs MPI_THREAD_MULTIPLE (" + std::to_string(MPI_THREAD_MULTIPLE) + ")") &&
                       Catch::Contains("thread support"));
      REQUIRE(exit_code_for(error) == 1);
    }
  }
}

TEST_CASE("MPI thread level: MPI_THREAD_MULTIPLE is accepted; unknown levels are named as such", "[mpi_runtime]") {
  REQUIRE_NOTHROW(require_thread_multiple(MPI_THREAD_MULTIPLE));
  REQUIRE(std::string(thread_level_name(MPI_THREAD_MULTIPLE)) == "MPI_THREAD_MULTIPLE");
  REQUIRE(std::string(thread_level_name(-7)) == "unknown");
}
