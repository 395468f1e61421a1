#include "strider/comm/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>

#include "comm/backoff.hpp"
#include "strider/core/log.hpp"

namespace strider {

namespace detail {

void throw_mpi_error(int code, const char* call, const char* file, int line, const std::string& hint) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  std::string full_hint = hint;
  if (length > 0) full_hint += (full_hint.empty() ? "" : ": ") + std::string(text, static_cast<std::size_t>(length));
  throw MpiError(ErrorContext{call, file, line, -1, error_class, full_hint});
}

void MpiCommTraits::release(MPI_Comm comm) noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF) return;
  if (MPI_Comm_free(&comm) != MPI_SUCCESS) log_warn("MPI_Comm_free failed while releasing a communicator");
}

}  // namespace detail

namespace {

// MPI counts are int: move large buffers in pieces.
constexpr std::int64_t max_bytes_per_call = INT_MAX / 2;
/// All-reduces of at most this many bytes (agreements, counters, a step's few figures) and
/// barriers wait by detail::wait_napping: a rank that is early sleeps instead of spinning a core
/// the late one may need (measured: w1 at 2 ranks on 2 cores, 11-26% more samples per CPU-second
/// in four alternated pairs), after a few yields (longer within detail::YieldingWaits). Larger ones (gradients) stay
/// MPI's blocking calls, whose progress a sleeping wait would stall.
constexpr std::int64_t kNappingCollectiveBytes = 256;

MPI_Op native_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
  }
  return MPI_SUM;
}

}  // namespace

Communicator Communicator::duplicate(MPI_Comm parent) {
  Communicator result;
  MPI_Comm duplicated = MPI_COMM_NULL;
  STRIDER_MPI_CHECK(MPI_Comm_dup(parent, &duplicated), "duplicating the caller's communicator");
  result.comm_.reset(duplicated);
  STRIDER_MPI_CHECK(MPI_Comm_set_errhandler(duplicated, MPI_ERRORS_RETURN), "setting MPI_ERRORS_RETURN");
  STRIDER_MPI_CHECK(MPI_Comm_rank(duplicated, &result.rank_), "");
  STRIDER_MPI_CHECK(MPI_Comm_size(duplicated, &result.size_), "");

  MPI_Comm node = MPI_COMM_NULL;
  STRIDER_MPI_CHECK(MPI_Comm_split_type(duplicated, MPI_COMM_TYPE_SHARED, result.rank_, MPI_INFO_NULL, &node),
                    "finding the ranks on this node");
  UniqueHandle<detail::MpiCommTraits> node_owner(node);
  STRIDER_MPI_CHECK(MPI_Comm_rank(node, &result.local_rank_), "");
  STRIDER_MPI_CHECK(MPI_Comm_size(node, &result.local_size_), "");
  return result;
}

void Communicator::barrier() const {
  MPI_Request request = MPI_REQUEST_NULL;
  STRIDER_MPI_CHECK(MPI_Ibarrier(native(), &request), "in a barrier");
  STRIDER_MPI_CHECK(detail::wait_napping(request), "in a barrier");
}

bool Communicator::arrive_together(const std::string& what) const {
  return strider::arrive_together(native(), what);
}

bool arrive_together(MPI_Comm comm, const std::string& what) {
  const char* setting = std::getenv("STRIDER_COLLECTIVE_WARN_S");
  double warn_after_s = 60.0;
  if (setting != nullptr && *setting != '\0') {
    char* end = nullptr;
    const double value = std::strtod(setting, &end);
    if (end != setting && *end == '\0' && value > 0.0) warn_after_s = value;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  STRIDER_MPI_CHECK(MPI_Ibarrier(comm, &request), what);
  const auto start = std::chrono::steady_clock::now();
  detail::Backoff backoff(1000, detail::collective_yield_us());
  bool warned = false;
  for (;;) {
    int done = 0;
    STRIDER_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return warned;
    if (!warned && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > warn_after_s) {
      log_warn("waited ", warn_after_s, " s so far for the other ranks at ", what,
               " (collective: every rank must make this call); still waiting");
      warned = true;
    }
    backoff.pause();
  }
}

void Communicator::broadcast(std::string& value, int root) const {
  std::int64_t length = static_cast<std::int64_t>(value.size());
  broadcast(&length, 1, root);
  value.resize(static_cast<std::size_t>(length));
  broadcast_bytes(value.data(), length, root);
}

void Communicator::broadcast_bytes(void* data, std::int64_t bytes, int root) const {
  auto* cursor = static_cast<char*>(data);
  for (std::int64_t done = 0; done < bytes || (bytes == 0 && done == 0); done += max_bytes_per_call) {
    const int piece = static_cast<int>(std::min(max_bytes_per_call, bytes - done));
    if (piece == 0) break;
    STRIDER_MPI_CHECK(MPI_Bcast(cursor + done, piece, MPI_BYTE, root, native()),
                      "broadcasting from rank " + std::to_string(root));
  }
}

void Communicator::all_reduce_typed(void* values, std::int64_t count, MPI_Datatype type, ReduceOp op) const {
  int type_bytes = 0;
  STRIDER_MPI_CHECK(MPI_Type_size(type, &type_bytes), "");
  const std::int64_t max_count = max_bytes_per_call / type_bytes;
  auto* cursor = static_cast<char*>(values);
  for (std::int64_t done = 0; done < count; done += max_count) {
    const int piece = static_cast<int>(std::min(max_count, count - done));
    void* const data = cursor + done * type_bytes;
    if (static_cast<std::int64_t>(piece) * type_bytes > kNappingCollectiveBytes) {
      STRIDER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, piece, type, native_op(op), native()), "in an all-reduce");
    } else {
      MPI_Request request = MPI_REQUEST_NULL;
      STRIDER_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, piece, type, native_op(op), native(), &request),
                        "in an all-reduce");
      STRIDER_MPI_CHECK(detail::wait_napping(request), "in an all-reduce");
    }
  }
}

void Communicator::all_gather_bytes(const void* send, void* receive, std::int64_t bytes_per_rank) const {
  STRIDER_MPI_CHECK(MPI_Allgather(send, static_cast<int>(bytes_per_rank), MPI_BYTE, receive,
                                  static_cast<int>(bytes_per_rank), MPI_BYTE, native()),
                    "in an all-gather");
}

void Communicator::require_same_values(const std::vector<std::pair<std::string, std::string>>& named,
                                       const std::string& advice) const {
  // Rank 0's values, as one text of length-prefixed fields (values may hold any byte).
  std::string root_text;
  for (const auto& entry : named) root_text += std::to_string(entry.second.size()) + ':' + entry.second;
  std::string mine = root_text;
  broadcast(root_text, 0);
  collective_try([&] {
    if (mine == root_text) return;
    std::size_t at = 0;
    for (const auto& [name, value] : named) {
      const std::size_t colon = root_text.find(':', at);
      const std::size_t length = colon == std::string::npos ? 0 : std::stoull(root_text.substr(at, colon - at));
      const std::string root_value = colon == std::string::npos ? std::string() : root_text.substr(colon + 1, length);
      at = colon == std::string::npos ? root_text.size() : colon + 1 + length;
      if (value != root_value)
        STRIDER_THROW(UsageError, name + " is '" + value + "' on rank " + std::to_string(rank_) + " but '" +
                                      root_value + "' on rank 0: " + advice);
    }
    STRIDER_THROW(UsageError, "rank " + std::to_string(rank_) + " has " + std::to_string(named.size()) +
                                  " settings to compare and rank 0 more: " + advice);
  });
}

void Communicator::agree(std::exception_ptr local_failure) const {
  // The lowest failing rank speaks for all; size_ means "nobody failed".
  const int failing_rank = all_reduce(local_failure ? rank_ : size_, ReduceOp::min);
  if (failing_rank == size_) return;

  std::string message;
  std::int32_t code_and_kind[2] = {1, static_cast<std::int32_t>(ErrorKind::other)};
  if (rank_ == failing_rank && !local_failure) {
    // Only where the ranks' collectives did not match (ranks running different code paths, as with
    // different options): the reduction paired with another call and its result means nothing.
    message = "[rank " + std::to_string(rank_) +
              "] the ranks' collective calls did not match (were the ranks given different options?)";
  } else if (rank_ == failing_rank) {
    try {
      std::rethrow_exception(local_failure);
    } catch (const std::exception& error) {
      message = error_message(error);
      code_and_kind[0] = exit_code_for(error);
      code_and_kind[1] = static_cast<std::int32_t>(error_kind(error));
    } catch (...) {
      message = "[rank " + std::to_string(rank_) + "] unknown exception";
    }
  }
  broadcast(message, failing_rank);
  broadcast(code_and_kind, 2, failing_rank);
  throw AgreedError(message, failing_rank, code_and_kind[0], static_cast<ErrorKind>(code_and_kind[1]), size_);
}

}  // namespace strider
