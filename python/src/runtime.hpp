#pragma once
/// \file
/// MPI as the module sees it. The module uses an MPI that runs already (mpi4py's, or a host
/// program's) and otherwise starts it itself, with MPI_THREAD_MULTIPLE; then it also finalises it
/// at exit. Loaders still open at exit are closed first, in the order they were opened (collective:
/// every rank must exit normally). A forked child of the process that uses MPI neither closes its
/// parent's loaders nor finalises or aborts MPI. Functions here are called with the GIL held.

#include <mpi.h>

#include <memory>

#include "bindings.hpp"
#include "loader_core.hpp"

namespace strider::python {

/// Starts MPI unless it runs. Throws Error when it was finalised already, or when it runs with less
/// than MPI_THREAD_MULTIPLE (the I/O thread reads while the caller runs collectives); throws
/// UsageError when the process's launcher (torchrun, srun without --mpi) started more processes than
/// MPI's world holds (require_launch_matches_mpi).
void ensure_mpi();

/// The communicator a Python `comm` argument names: MPI_COMM_WORLD for None, else an mpi4py
/// communicator (or any object with py2f()) through MPI_Comm_f2c. Throws UsageError otherwise.
MPI_Comm communicator_from_python(py::handle comm);

/// Keeps an open loader until forget_loader() or the exit, which closes it.
void track_open_loader(std::shared_ptr<LoaderCore> core);
/// Drops a closed (or abandoned) loader from the list.
void forget_loader(const LoaderCore* core);

}  // namespace strider::python
