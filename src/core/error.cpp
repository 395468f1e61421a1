#include "strider/core/error.hpp"

#include <mpi.h>

#include <cstring>

#include "strider/core/log.hpp"

namespace strider {
namespace {

std::string make_reason(const ErrorContext& context) {
  if (context.call.empty()) return context.hint;
  // Only the function name of the call text: "H5Dread(dataset, ...)" -> "H5Dread".
  std::string name = context.call.substr(0, context.call.find('('));
  std::string reason = name + " failed";
  if (!context.hint.empty()) reason += " " + context.hint;
  return reason;
}

std::string make_what(const ErrorContext& context, const std::string& reason) {
  std::string what;
  if (context.rank >= 0) what = "[rank " + std::to_string(context.rank) + "] ";
  what += reason;
  if (!context.file.empty()) what += " (" + context.file + ":" + std::to_string(context.line) + ")";
  return what;
}

ErrorContext with_rank(ErrorContext context) {
  if (context.rank == -1) context.rank = current_world_rank();  // -2: no rank (agreed)
  return context;
}

}  // namespace

Error::Error(ErrorContext context) : Error(with_rank(std::move(context)), 0) {}

Error::Error(std::string reason, const char* file, int line)
    : Error(ErrorContext{"", file ? file : "", line, -1, 0, std::move(reason)}) {}

// Private delegation target: the context already carries its rank.
Error::Error(ErrorContext&& context, int)
    : std::runtime_error(make_what(context, make_reason(context))),
      context_(std::move(context)),
      reason_(make_reason(context_)) {}

AgreedError::AgreedError(std::string message, int failing_rank, int exit_code)
    : AgreedError(std::move(message), failing_rank, exit_code, exit_code == 2 ? ErrorKind::usage : ErrorKind::other,
                  0) {}

AgreedError::AgreedError(std::string message, int failing_rank, int exit_code, ErrorKind kind, int ranks)
    : Error(ErrorContext{"", "", 0, -2, 0, std::move(message)}),
      failing_rank_(failing_rank),
      exit_code_(exit_code),
      kind_(kind),
      ranks_(ranks) {}

namespace detail {
void throw_system_error(const std::string& call, const std::string& hint, int error_number, const char* file,
                        int line) {
  throw SystemError(ErrorContext{call, relative_source_path(file), line, -1, error_number,
                                 hint + ": " + std::strerror(error_number)});
}
}  // namespace detail

int exit_code_for(const std::exception& error) noexcept {
  if (auto* agreed = dynamic_cast<const AgreedError*>(&error)) return agreed->exit_code();
  if (dynamic_cast<const UsageError*>(&error)) return 2;
  return 1;
}

ErrorKind error_kind(const std::exception& error) noexcept {
  if (auto* agreed = dynamic_cast<const AgreedError*>(&error)) return agreed->kind();
  if (dynamic_cast<const UsageError*>(&error)) return ErrorKind::usage;
  if (dynamic_cast<const DataError*>(&error)) return ErrorKind::data;
  if (dynamic_cast<const MpiError*>(&error)) return ErrorKind::mpi;
  if (dynamic_cast<const Hdf5Error*>(&error)) return ErrorKind::hdf5;
  if (dynamic_cast<const SystemError*>(&error)) return ErrorKind::system;
  if (dynamic_cast<const CudaError*>(&error)) return ErrorKind::cuda;
  if (dynamic_cast<const NcclError*>(&error)) return ErrorKind::nccl;
  return ErrorKind::other;
}

std::string error_message(const std::exception& error) {
  if (auto* usage = dynamic_cast<const UsageError*>(&error)) return usage->reason();
  if (auto* agreed = dynamic_cast<const AgreedError*>(&error)) return agreed->reason();
  // The source location helps whoever debugs strider, not whoever fixes the input: it is kept in
  // what() and printed at STRIDER_LOG_LEVEL=debug.
  if (auto* strider_error = dynamic_cast<const Error*>(&error); strider_error && log_level() < LogLevel::debug) {
    const int rank = strider_error->context().rank;
    return (rank >= 0 ? "[rank " + std::to_string(rank) + "] " : std::string()) + strider_error->reason();
  }
  return error.what();
}

int current_world_rank() noexcept {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

namespace detail {
const char* relative_source_path(const char* file) noexcept {
  if (file == nullptr) return "";
  // Keep the path from the last top-level folder of the repository on.
  for (const char* marker : {"/src/", "/apps/", "/tests/", "/include/"}) {
    if (const char* found = std::strstr(file, marker)) return found + 1;
  }
  return file;
}
}  // namespace detail

}  // namespace strider
