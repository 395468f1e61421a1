#include "strider/comm/mpi_runtime.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "strider/core/log.hpp"

namespace strider {

MpiRuntime::MpiRuntime(int& argc, char**& argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Query_thread(&provided_);
  } else {
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided_) != MPI_SUCCESS)
      STRIDER_THROW(MpiError, "MPI_Init_thread failed");
    owns_mpi_ = true;
  }
  if (provided_ < MPI_THREAD_MULTIPLE) {
    // The I/O thread reads through MPI-IO while the main thread runs collectives.
    std::string reason = "MPI provides thread level " + std::to_string(provided_) +
                         " but strider needs MPI_THREAD_MULTIPLE (" + std::to_string(MPI_THREAD_MULTIPLE) +
                         "); use an MPI built with thread support";
    if (owns_mpi_) MPI_Finalize();
    owns_mpi_ = false;
    STRIDER_THROW(MpiError, reason);
  }
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
    return 1;
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
