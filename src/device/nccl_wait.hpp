#pragma once
// The host-side decision of every NCCL wait in the CUDA backend: poll a non-blocking operation
// (communicator creation, an enqueue, the compute stream with an all-reduce on it, finalization)
// until it completes, fails, runs past the timeout, or a peer rank reports its own failure over MPI;
// on failure or timeout tell the peers, abort the communicator, then throw NcclError, so that no rank
// hangs and none waits for the timeout when another already knows. No CUDA or NCCL type appears
// here: the backend supplies the polls, the clock, the abort and the MPI notices, and the tests
// drive the same logic with NCCL, the clock and (in the unit test) MPI stood in.

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

/// What a wait calls; all supplied by the caller. peer_failure and tell_peers may be left empty (a
/// single rank, or a test of the NCCL side alone).
struct NcclWaitHooks {
  std::function<NcclPoll()> poll;  ///< one poll (ncclCommGetAsyncError, cudaStreamQuery); may throw
  std::function<double()> now_s;   ///< a monotonic clock, seconds
  std::function<void()> pause;     ///< waits a little between two polls
  std::function<void()> abort;     ///< ncclCommAbort of the communicator; must not throw
  /// A peer rank's failure that reached this rank over MPI ("rank 3: ..."), or "" when none: polled
  /// with every poll, so that a rank whose peer failed stops at once instead of at the timeout.
  std::function<std::string()> peer_failure;
  /// Tells every peer rank over MPI that this rank failed, with the reason; must not throw or block.
  std::function<void(const std::string&)> tell_peers;
};

/// Polls until an operation is done. On a failed poll, on an exception thrown by a poll, or when
/// timeout_s > 0 and the operation is still running timeout_s after the first poll, first tells the
/// peers (tell_peers, so that they stop too), then calls abort() once and throws: NcclError naming
/// `what` ("the gradient all-reduce") for a failure or a timeout, the poll's own exception otherwise.
/// When a peer's failure arrives (peer_failure), calls abort() once and throws NcclError naming the
/// peer and its reason, without telling the peers again. timeout_s == 0 waits forever. Not
/// collective; one thread per communicator.
void wait_for_nccl_operation(const NcclWaitHooks& hooks, double timeout_s, const std::string& what);

}  // namespace strider::detail
