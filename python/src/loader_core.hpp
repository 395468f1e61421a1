#pragma once
/// \file
/// What a Python Loader holds: the communicator, the Loader and the position that iter(loader)
/// continues from. Shared by the Loader object, its epochs and its batches (a batch's numpy views
/// keep it, and so the ring's memory, alive), and by the runtime's list of open loaders, which closes
/// them at exit. All fields are used with `mutex` held (by the thread that released the GIL).
///
/// A forked child (a torch DataLoader worker) inherits the object but not the Loader's threads, its
/// MPI or a `mutex` that another thread held at the fork: there nothing may wait on them, so the
/// child never uses the Loader and, when the child drops the object, leaves the Loader undestroyed.

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "strider/comm/communicator.hpp"
#include "strider/pipeline/loader.hpp"

namespace strider::python {

struct LoaderCore {
  std::unique_ptr<Communicator> comm;  // declared before the Loader: destroyed after it
  std::unique_ptr<Loader> loader;
  std::mutex mutex;   // one caller inside the Loader at a time
  bool copy = false;  // batches own copies of their arrays
  /// The epoch iter(loader) runs: set_epoch(), load_state_dict(), one more after an epoch ends.
  std::int64_t current_epoch = 0;
  /// The position is the start of current_epoch (nothing of it read yet, or a whole epoch read).
  bool at_epoch_start = true;
  /// Bumped by every epoch start and resume: an older Epoch object no longer moves the position.
  std::uint64_t serial = 0;
  /// The process that created the Loader.
  const pid_t creator_pid = getpid();

  /// Whether this process is a forked child of the one that created the Loader.
  bool in_forked_child() const noexcept { return getpid() != creator_pid; }

  /// In a forked child, leaves the Loader and the communicator undestroyed: their destructors
  /// would join threads that do not exist here and free MPI objects of the parent's MPI.
  ~LoaderCore() {
    if (!in_forked_child()) return;
    static_cast<void>(loader.release());
    static_cast<void>(comm.release());
  }
};

}  // namespace strider::python
