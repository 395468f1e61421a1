// MpiRuntime's check of the thread level MPI provides (require_thread_multiple), with the provided
// level stood in: every level below MPI_THREAD_MULTIPLE is refused with one line that names it and
// the level strider needs; MPI_THREAD_MULTIPLE passes.
#include <catch2/catch.hpp>
#include <cstdlib>
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

TEST_CASE("MPI-IO: Open MPI 4's ompio is avoided unless the user chose it", "[mpi_runtime]") {
  // Restores OMPI_MCA_io as it was, whatever the checks below do.
  struct SavedChoice {
    bool had = std::getenv("OMPI_MCA_io") != nullptr;
    std::string value = had ? std::getenv("OMPI_MCA_io") : "";
    ~SavedChoice() {
      if (had) {
        ::setenv("OMPI_MCA_io", value.c_str(), 1);
      } else {
        ::unsetenv("OMPI_MCA_io");
      }
    }
  } saved;
  ::unsetenv("OMPI_MCA_io");
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5
  REQUIRE_FALSE(mpi_io_is_thread_safe());
  prefer_thread_safe_mpi_io();
  REQUIRE(std::string(std::getenv("OMPI_MCA_io")) == "^ompio");
  REQUIRE(mpi_io_is_thread_safe());
  // A choice the user made stays, and is judged as it reads.
  ::setenv("OMPI_MCA_io", "ompio", 1);
  prefer_thread_safe_mpi_io();
  REQUIRE(std::string(std::getenv("OMPI_MCA_io")) == "ompio");
  REQUIRE_FALSE(mpi_io_is_thread_safe());
  ::setenv("OMPI_MCA_io", "romio321", 1);
  REQUIRE(mpi_io_is_thread_safe());
  ::setenv("OMPI_MCA_io", "^romio321", 1);
  REQUIRE_FALSE(mpi_io_is_thread_safe());
#else
  prefer_thread_safe_mpi_io();
  REQUIRE(std::getenv("OMPI_MCA_io") == nullptr);  // nothing to avoid: the variable is left alone
  REQUIRE(mpi_io_is_thread_safe());
#endif
}
