#pragma once
/// \file
/// Starting and stopping MPI for an app, and the app's main wrapper that turns any error into one
/// line "strider: error: <reason>" on stderr (printed once, by rank 0) and a non-zero exit.

#include <functional>
#include <string>

#include "strider/comm/communicator.hpp"

namespace strider {

/// Initialises MPI with MPI_THREAD_MULTIPLE (the I/O thread calls MPI-IO while the main thread
/// runs collectives) unless the caller already did, and finalises it in the destructor only if it
/// initialised it. Throws Error if MPI cannot provide MPI_THREAD_MULTIPLE, and UsageError when the
/// process's launcher started more processes than MPI's world holds (require_launch_matches_mpi).
class MpiRuntime {
 public:
  MpiRuntime(int& argc, char**& argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  /// The thread level MPI provided.
  int provided_thread_level() const noexcept { return provided_; }

 private:
  bool owns_mpi_ = false;
  int provided_ = 0;
};

/// Makes the MPI library about to be initialised in this process choose a thread-safe MPI-IO
/// component: with Open MPI before 5.0 it sets OMPI_MCA_io=^ompio (ROMIO then) unless the variable is
/// set already. Open MPI 4's ompio walks its list of pending I/O requests from any thread's MPI
/// progress without a lock, so a thread inside MPI (the store's server, the I/O thread fetching
/// remote rows) while another thread does MPI-IO (strider-gen's parallel writes, a trainer's
/// parallel-HDF5 checkpoint) can crash there. ROMIO serialises its calls. Call before
/// MPI_Init_thread; MpiRuntime and the Python module do. A no-op with other MPI libraries.
void prefer_thread_safe_mpi_io() noexcept;

/// False where this process's MPI-IO may be Open MPI 4's ompio (see prefer_thread_safe_mpi_io):
/// MPI-IO there must not run while another thread is inside MPI. Decided from OMPI_MCA_io.
bool mpi_io_is_thread_safe() noexcept;

/// The name of an MPI thread level ("MPI_THREAD_SERIALIZED"), or "unknown" for another value.
const char* thread_level_name(int level) noexcept;

/// The MPI strider was built with, as --version names it: "Open MPI 4.1.4 (MPI 3.1)" (another
/// implementation: "MPI (MPI 3.1)").
std::string mpi_build_version();

/// The check MpiRuntime makes on what MPI_Init_thread (or MPI_Query_thread) provided: throws MpiError,
/// one line naming the provided and the needed level, when `provided` is below MPI_THREAD_MULTIPLE.
/// Not collective (every rank decides alike on the level its MPI library gives).
void require_thread_multiple(int provided);

/// Runs an MPI app's body on a duplicate of MPI_COMM_WORLD and returns the process exit code.
/// - body returns the exit code on success.
/// - An AgreedError (see Communicator::collective_try) is printed once by rank 0 as
///   "strider: error: <reason>"; every rank returns its exit code.
/// - Any other exception escaped without agreement, so other ranks may be blocked in a collective:
///   the rank prints "strider: error: <what>" and calls MPI_Abort (when there are several ranks).
int run_mpi_app(int argc, char** argv, const std::function<int(Communicator& world)>& body);

/// Runs an app body that needs no MPI; errors print "strider: error: <reason>" and return 2 for
/// usage errors, 1 otherwise.
int run_app_without_mpi(const std::function<int()>& body);

/// Writes "strider: error: <message>" to stderr as one line and flushes.
void print_error_line(const std::string& message);

}  // namespace strider
