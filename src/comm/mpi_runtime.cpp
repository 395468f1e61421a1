#include "strider/comm/mpi_runtime.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "strider/comm/launch_check.hpp"
#include "strider/core/log.hpp"

namespace strider {

namespace {
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5
constexpr bool kOmpioMayRace = true;
#else
constexpr bool kOmpioMayRace = false;
#endif
}  // namespace

void prefer_thread_safe_mpi_io() noexcept {
  if (kOmpioMayRace) ::setenv("OMPI_MCA_io", "^ompio", /*overwrite=*/0);
}

bool mpi_io_is_thread_safe() noexcept {
  if (!kOmpioMayRace) return true;
  const char* choice = std::getenv("OMPI_MCA_io");
  if (choice == nullptr) return false;
  if (choice[0] == '^') return std::strstr(choice, "ompio") != nullptr;
  return std::strstr(choice, "ompio") == nullptr;  // a list of components to use, ompio not among them
}

MpiRuntime::MpiRuntime(int& argc, char**& argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Query_thread(&provided_);
  } else {
    prefer_thread_safe_mpi_io();
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided_) != MPI_SUCCESS)
      STRIDER_THROW(MpiError, "MPI_Init_thread failed");
    owns_mpi_ = true;
  }
  try {
    require_thread_multiple(provided_);
    int world_size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    require_launch_matches_mpi(world_size);
  } catch (...) {
    if (owns_mpi_) MPI_Finalize();
    owns_mpi_ = false;
    throw;
  }
}

std::string mpi_build_version() {
#if defined(OPEN_MPI)
  std::string version = "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) +
                        "." + std::to_string(OMPI_RELEASE_VERSION);
#else
  std::string version = "MPI";
#endif
  return version + " (MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION) + ")";
}

const char* thread_level_name(int level) noexcept {
  if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return "unknown";
}

void require_thread_multiple(int provided) {
  if (provided >= MPI_THREAD_MULTIPLE) return;
  // The I/O thread reads through MPI-IO while the main thread runs collectives.
  STRIDER_THROW(MpiError, std::string("MPI provides thread level ") + thread_level_name(provided) + " (" +
                              std::to_string(provided) + ") but strider needs MPI_THREAD_MULTIPLE (" +
                              std::to_string(MPI_THREAD_MULTIPLE) +
                              "): its I/O thread reads while the main thread runs collectives; use an MPI "
                              "library built with thread support");
}

MpiRuntime::~MpiRuntime() {
  if (!owns_mpi_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void print_error_line(const std::string& message) {
  std::string line = "strider: error: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

int run_mpi_app(int argc, char** argv, const std::function<int(Communicator& world)>& body) {
  std::unique_ptr<MpiRuntime> runtime;
  try {
    runtime = std::make_unique<MpiRuntime>(argc, argv);
  } catch (const std::exception& error) {
    print_error_line(error_message(error));
    return exit_code_for(error);
  }
  std::unique_ptr<Communicator> world;
  try {
    world = std::make_unique<Communicator>(Communicator::duplicate(MPI_COMM_WORLD));
    return body(*world);
  } catch (const AgreedError& error) {
    if (world && world->is_root()) print_error_line(error.reason());
    return error.exit_code();
  } catch (const std::exception& error) {
    const int code = exit_code_for(error);
    print_error_line(error_message(error));
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) {
      // Let the launcher forward the error line before its own abort banner.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      MPI_Abort(MPI_COMM_WORLD, code);
    }
    return code;
  }
}

int run_app_without_mpi(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    print_error_line(error_message(error));
    return exit_code_for(error);
  }
}

}  // namespace strider
