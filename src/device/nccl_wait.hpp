#pragma once
// The host-side decision of every NCCL wait in the CUDA backend: poll a non-blocking operation
// (communicator creation, an enqueue, a running all-reduce, finalization) until it completes, fails,
// or runs past the timeout; on failure or timeout abort the communicator, then throw NcclError so
// that no rank hangs. No CUDA or NCCL type appears here: the backend supplies the polls, the clock
// and the abort, and a unit test drives the same logic with NCCL and the clock stood in.

#include <cstdint>
#include <functional>
#include <string>

namespace strider::detail {

/// One look at a running NCCL operation.
struct NcclPoll {
  enum class State { done, running, failed };
  State state = State::running;
  std::int64_t code = 0;  ///< the native error code (ncclResult_t), when failed
  std::string error;      ///< NCCL's text for it (ncclGetErrorString, last error), when failed
};

/// What a wait calls; all supplied by the caller.
struct NcclWaitHooks {
  std::function<NcclPoll()> poll;  ///< one poll (ncclCommGetAsyncError, cudaStreamQuery); may throw
  std::function<double()> now_s;   ///< a monotonic clock, seconds
  std::function<void()> pause;     ///< waits a little between two polls
  std::function<void()> abort;     ///< ncclCommAbort of the communicator; must not throw
};

/// Polls until an operation is done. On a failed poll, on an exception thrown by a poll, or when
/// timeout_s > 0 and the operation is still running timeout_s after the first poll, calls abort()
/// once and throws: NcclError naming `what` ("the gradient all-reduce") for a failure or a timeout,
/// the poll's own exception otherwise. timeout_s == 0 waits forever. Not collective; one thread per
/// communicator.
void wait_for_nccl_operation(const NcclWaitHooks& hooks, double timeout_s, const std::string& what);

}  // namespace strider::detail
