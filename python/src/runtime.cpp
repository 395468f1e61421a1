#include "runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "strider/comm/launch_check.hpp"
#include "strider/comm/mpi_check.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/train/stop_signal.hpp"

namespace strider::python {

namespace {

struct RuntimeState {
  bool owns_mpi = false;  // this module called MPI_Init_thread, so it finalises
  pid_t mpi_pid = 0;      // the process that ensure_mpi() first found MPI running in (0: not yet)
  std::vector<std::shared_ptr<LoaderCore>> open_loaders;
};

RuntimeState& runtime() {
  static auto* const state = new RuntimeState();  // never destroyed: used until the interpreter ends
  return *state;
}

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

/// Whether this process is a forked child of the one that uses MPI (MPI does not carry over a fork).
bool in_forked_child() {
  const pid_t mpi_pid = runtime().mpi_pid;
  return mpi_pid != 0 && mpi_pid != getpid();
}

/// Closes the loaders still open (and destroys those kept for their store's collective teardown)
/// and finalises MPI if this module started it (Python's atexit,
/// which runs before mpi4py finalises its MPI). In a forked child: neither (they are the parent's).
void at_exit() {
  RuntimeState& state = runtime();
  std::vector<std::shared_ptr<LoaderCore>> open = std::move(state.open_loaders);
  state.open_loaders.clear();
  py::gil_scoped_release release;
  if (mpi_running() && !in_forked_child()) {
    for (const std::shared_ptr<LoaderCore>& core : open) {
      if (core->in_forked_child()) continue;
      std::lock_guard<std::mutex> lock(core->mutex);
      try {
        if (core->comm->is_root() && !core->loader->closed())
          log_warn("a Loader of ", core->loader->options().data_path,
                   " was not closed: closing it at exit (collective: every rank must exit normally)");
        core->loader->close();
      } catch (const std::exception& error) {
        log_warn("closing a Loader at exit failed: ", error.what());
      }
    }
  }
  if (state.owns_mpi && mpi_running() && !in_forked_child()) MPI_Finalize();
}

/// MPI_Abort on MPI_COMM_WORLD when more than one rank runs; nothing otherwise, or in a forked child.
void abort_job(int code) {
  if (!mpi_running() || in_forked_child()) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size <= 1) return;
  py::gil_scoped_release release;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the launcher forwards the traceback first
  MPI_Abort(MPI_COMM_WORLD, code);
}

/// Collective over comm: every rank must call. The logical OR of every rank's `flag`, with the GIL
/// released while the ranks meet (a rank that arrives late keeps no other thread waiting for it).
bool any_rank(bool flag, const py::object& comm) {
  ensure_mpi();
  const MPI_Comm native = communicator_from_python(comm);
  int local = flag ? 1 : 0;
  int any = 0;
  {
    py::gil_scoped_release release;
    STRIDER_MPI_CHECK(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_LOR, native), "agreeing on a flag over the ranks");
  }
  return any != 0;
}

}  // namespace

void ensure_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) STRIDER_THROW(Error, "MPI was finalised already: strider cannot start a Loader after that");
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    py::gil_scoped_release release;
    prefer_thread_safe_mpi_io();
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      STRIDER_THROW(MpiError, "MPI_Init_thread failed");
    runtime().owns_mpi = true;
  }
  if (runtime().mpi_pid == 0) runtime().mpi_pid = getpid();
  if (provided < MPI_THREAD_MULTIPLE)
    STRIDER_THROW(MpiError, "MPI runs with thread level " + std::to_string(provided) +
                                " but strider needs MPI_THREAD_MULTIPLE (the I/O thread reads while the caller runs "
                                "collectives); with mpi4py keep mpi4py.rc.thread_level = 'multiple' (its default)");
  int world_size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  require_launch_matches_mpi(world_size);
}

MPI_Comm communicator_from_python(py::handle comm) {
  if (comm.is_none()) return MPI_COMM_WORLD;
  if (!py::hasattr(comm, "py2f"))
    STRIDER_THROW(UsageError, "comm must be an mpi4py communicator (an object with py2f()), got " +
                                  std::string(py::str(py::type::handle_of(comm).attr("__name__"))));
  const auto fortran_handle = comm.attr("py2f")().cast<MPI_Fint>();
  MPI_Comm native = MPI_Comm_f2c(fortran_handle);
  if (native == MPI_COMM_NULL) STRIDER_THROW(UsageError, "comm is MPI.COMM_NULL (this rank is not in it)");
  return native;
}

void track_open_loader(std::shared_ptr<LoaderCore> core) {
  runtime().open_loaders.push_back(std::move(core));
}

void forget_loader(const LoaderCore* core) {
  auto& open = runtime().open_loaders;
  open.erase(std::remove_if(open.begin(), open.end(), [core](const auto& held) { return held.get() == core; }),
             open.end());
}

void bind_runtime(py::module_& module) {
  module.def("_ensure_mpi", &ensure_mpi, "Starts MPI (MPI_THREAD_MULTIPLE) unless it runs.");
  module.def(
      "_world",
      [] {
        ensure_mpi();
        int rank = 0, size = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        return py::make_tuple(rank, size);
      },
      "(rank, size) of MPI_COMM_WORLD, starting MPI unless it runs.");
  module.def(
      "_mpi_state",
      [] {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        return py::make_tuple(initialized != 0, finalized != 0, runtime().owns_mpi);
      },
      "(initialized, finalized, started by strider).");
  module.def("_abort_job", &abort_job, py::arg("code"),
             "MPI_Abort(MPI_COMM_WORLD, code) when MPI runs with more than one rank; nothing otherwise.");
  module.def("_any_rank", &any_rank, py::arg("flag"), py::arg("comm") = py::none(),
             "Collective over comm (an mpi4py communicator; None: MPI_COMM_WORLD): whether `flag` is true on any "
             "rank (MPI_Allreduce with MPI_LOR, the GIL released). Starts MPI unless it runs.");
  module.attr("_exit_code_preempted") = exit_code_preempted;
  module.def("_at_exit", &at_exit,
             "Closes the loaders still open (collective), then finalises MPI if strider started it.");
}

}  // namespace strider::python
