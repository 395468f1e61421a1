#pragma once
/// \file
/// Checked MPI calls: STRIDER_MPI_CHECK(MPI_Bcast(...), "broadcasting the seed") throws MpiError
/// with the call text, file:line, rank, MPI error class and MPI's own message. It can fire only on
/// communicators with MPI_ERRORS_RETURN (every Communicator sets it; see STYLE.md 3).

#include <string>

namespace strider::detail {
/// Throws MpiError for a failed MPI call (code != MPI_SUCCESS). Not for direct use: see the macro.
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line, const std::string& hint);
}  // namespace strider::detail

#define STRIDER_MPI_CHECK(call, hint)                                                                                 \
  do {                                                                                                                \
    const int strider_mpi_code_ = (call);                                                                             \
    if (strider_mpi_code_ != 0 /* MPI_SUCCESS */)                                                                     \
      ::strider::detail::throw_mpi_error(strider_mpi_code_, #call, ::strider::detail::relative_source_path(__FILE__), \
                                         __LINE__, hint);                                                             \
  } while (0)
