#pragma once
// A clear line instead of a bare "Bus error" when a mapped data file changes under the mmap engine.
// Reading a mapped page past the end of a file that was truncated (or whose storage failed) after it
// was mapped raises SIGBUS; strider checks its files at open and at each epoch's start, but not
// between two page touches. Each FileMapping registers its bytes here; a SIGBUS inside one prints
// "strider: error: <what> could not be read through its mapping (SIGBUS): ..." on stderr and then
// dies of the signal as before (mpirun then ends the job). A SIGBUS elsewhere is passed on untouched
// to the handler that was installed before (Open MPI's, or the default).

#include <cstddef>
#include <string>

namespace strider::io_detail {

/// Registers [begin, begin + bytes), named by `what`, and installs the SIGBUS handler on first use.
/// Returns the slot to release, or -1 when every slot is taken (that mapping then gets the bare
/// signal). Thread-safe.
int register_mapping(const void* begin, std::size_t bytes, const std::string& what) noexcept;

/// Forgets a slot from register_mapping (before the bytes are unmapped); -1 does nothing.
void release_mapping(int slot) noexcept;

}  // namespace strider::io_detail
