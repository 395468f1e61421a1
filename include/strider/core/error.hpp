#pragma once
/// \file
/// strider's error types. Every failure carries where it happened (file:line), on which MPI rank,
/// the failing call and its native code, and a hint in the caller's words, so that one line in a
/// log of 512 ranks says what went wrong:
///   [rank 3] H5Dread failed reading /samples rows 1024..2047 (src/io/h5_reader.cpp:88)

#include <cstdint>
#include <stdexcept>
#include <string>

namespace strider {

/// Where an error was raised: the call text (or a short description), the source location and the
/// MPI rank (-1 when MPI is not running).
struct ErrorContext {
  std::string call;       ///< the failing call as written (e.g. "H5Dread(...)"), or empty
  std::string file;       ///< source file, relative to the repository root where possible
  int line = 0;           ///< source line
  int rank = -1;          ///< world rank of the process that raised it, -1 without MPI
  std::int64_t code = 0;  ///< the native error code (MPI error class, herr_t, cudaError_t, ...)
  std::string hint;       ///< what the caller was doing, in words ("reading /samples rows 0..255")
};

/// Base of every strider error. what() is the full one-line message with rank and location;
/// reason() is the message without the rank prefix and location (what a user must fix).
class Error : public std::runtime_error {
 public:
  explicit Error(ErrorContext context);
  /// An error with only a reason (no call), raised at the current location.
  Error(std::string reason, const char* file, int line);

  const ErrorContext& context() const noexcept { return context_; }
  /// The message without rank and location, e.g. "H5Dread failed: reading /samples rows 0..255".
  const std::string& reason() const noexcept { return reason_; }

 private:
  Error(ErrorContext&& context_with_rank, int);
  ErrorContext context_;
  std::string reason_;
};

/// A user error: bad options, impossible combinations, unusable input files. Apps exit with 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Bad or unusable data: a file that is not what strider needs (wrong shape, type, offsets, ...).
class DataError : public Error {
 public:
  using Error::Error;
};

/// An MPI call returned an error (the communicator has MPI_ERRORS_RETURN set).
class MpiError : public Error {
 public:
  using Error::Error;
};

/// An HDF5 call failed (returned a negative value or an invalid handle).
class Hdf5Error : public Error {
 public:
  using Error::Error;
};

/// A POSIX call (open, pread, mmap, ...) failed; code is errno.
class SystemError : public Error {
 public:
  using Error::Error;
};

/// A CUDA runtime call failed (only raised by the CUDA part).
class CudaError : public Error {
 public:
  using Error::Error;
};

/// An NCCL call failed or NCCL reported an asynchronous error (only raised by the CUDA part).
class NcclError : public Error {
 public:
  using Error::Error;
};

/// Which of the error types above an error is, as a value that can cross ranks (and languages).
enum class ErrorKind : std::int32_t { other, usage, data, mpi, hdf5, system, cuda, nccl };

/// Raised on every rank when the ranks agreed that some rank failed (see Communicator::agree).
/// what() is the failing rank's own message; failing_rank() says which rank it was.
class AgreedError : public Error {
 public:
  AgreedError(std::string message, int failing_rank, int exit_code);
  /// `kind`: the failing rank's error type; `ranks`: how many ranks agreed (the communicator's size).
  AgreedError(std::string message, int failing_rank, int exit_code, ErrorKind kind, int ranks);
  int failing_rank() const noexcept { return failing_rank_; }
  /// The exit code the failing rank asked for (2 for UsageError, 1 otherwise).
  int exit_code() const noexcept { return exit_code_; }
  /// The type of the failing rank's error (other when unknown).
  ErrorKind kind() const noexcept { return kind_; }
  /// The number of ranks that agreed on this error and raise it (0 when unknown).
  int ranks() const noexcept { return ranks_; }

 private:
  int failing_rank_;
  int exit_code_;
  ErrorKind kind_ = ErrorKind::other;
  int ranks_ = 0;
};

/// The exit code an app uses for an error: 2 for usage errors, 1 for everything else.
int exit_code_for(const std::exception& error) noexcept;

/// The kind of a strider error (an AgreedError: its failing rank's kind); other for anything else.
ErrorKind error_kind(const std::exception& error) noexcept;

/// The message to print after "strider: error: " for any exception: a usage error's reason; for
/// other strider errors the rank and the reason, and what() (with the source location) at
/// STRIDER_LOG_LEVEL=debug; what() for anything else.
std::string error_message(const std::exception& error);

/// The world rank of this process, or -1 if MPI is not initialised (or already finalised).
int current_world_rank() noexcept;

namespace detail {
/// Strips the build's source directory from __FILE__ so messages show "src/io/x.cpp".
const char* relative_source_path(const char* file) noexcept;

/// Throws SystemError for the failed POSIX `call` with `error_number` (an errno value) as its code
/// and strerror's text after `hint`. Use STRIDER_THROW_ERRNO.
[[noreturn]] void throw_system_error(const std::string& call, const std::string& hint, int error_number,
                                     const char* file, int line);
}  // namespace detail

}  // namespace strider

/// Throws ExceptionType (a strider::Error) with a formatted reason at the current location.
/// Usage: STRIDER_THROW(UsageError, "--world must be positive, got " + std::to_string(w));
#define STRIDER_THROW(ExceptionType, reason) \
  throw ExceptionType((reason), ::strider::detail::relative_source_path(__FILE__), __LINE__)

/// Throws SystemError for a failed POSIX call: call text, errno value and text, and what the caller
/// was doing, e.g. STRIDER_THROW_ERRNO("pread()", "reading rows 0..255 of data.h5", errno) gives
/// "pread() failed reading rows 0..255 of data.h5: Input/output error". Pass errno as read right
/// after the call (save it first when other calls, such as close or unlink, run in between).
#define STRIDER_THROW_ERRNO(call, hint, error_number)                                                 \
  do {                                                                                                \
    const int strider_error_number_ = (error_number);                                                 \
    ::strider::detail::throw_system_error((call), (hint), strider_error_number_, __FILE__, __LINE__); \
  } while (0)

/// Throws UsageError with reason unless condition holds.
#define STRIDER_REQUIRE(condition, reason)                          \
  do {                                                              \
    if (!(condition)) STRIDER_THROW(::strider::UsageError, reason); \
  } while (0)
