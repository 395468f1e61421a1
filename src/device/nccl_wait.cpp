#include "device/nccl_wait.hpp"

#include <sstream>

#include "strider/core/error.hpp"

namespace strider::detail {

void wait_for_nccl_operation(const NcclWaitHooks& hooks, double timeout_s, const std::string& what) {
  NcclPoll poll;
  double waited_s = 0.0;
  bool timed_out = false;
  std::string peer;
  try {
    const double start_s = hooks.now_s();
    while (true) {
      poll = hooks.poll();
      if (poll.state == NcclPoll::State::done) return;
      if (poll.state == NcclPoll::State::failed) break;
      if (hooks.peer_failure) peer = hooks.peer_failure();
      if (!peer.empty()) break;
      waited_s = hooks.now_s() - start_s;
      if (timeout_s > 0 && waited_s > timeout_s) {
        timed_out = true;
        break;
      }
      hooks.pause();
    }
  } catch (const std::exception& error) {
    // A poll that throws (a CUDA error) leaves the communicator unusable too.
    if (hooks.tell_peers) hooks.tell_peers(what + ": " + error_message(error));
    hooks.abort();
    throw;
  } catch (...) {
    if (hooks.tell_peers) hooks.tell_peers(what + ": an unknown error");
    hooks.abort();
    throw;
  }
  if (!peer.empty()) {
    hooks.abort();
    STRIDER_THROW(NcclError, what + " stopped: " + peer + "; the NCCL communicator was aborted");
  }
  if (timed_out) {
    std::ostringstream reason;
    reason << what << " made no progress for " << waited_s << " s (STRIDER_NCCL_TIMEOUT_S=" << timeout_s
           << "); a peer rank probably failed";
    if (hooks.tell_peers) hooks.tell_peers(reason.str());
    hooks.abort();
    STRIDER_THROW(NcclError, reason.str() + "; the NCCL communicator was aborted");
  }
  const std::string reason = what + ": " + poll.error;
  if (hooks.tell_peers) hooks.tell_peers(reason);
  hooks.abort();
  throw NcclError(ErrorContext{"ncclCommGetAsyncError", relative_source_path(__FILE__), __LINE__, -1, poll.code,
                               reason + "; the NCCL communicator was aborted"});
}

}  // namespace strider::detail
