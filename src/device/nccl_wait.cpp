#include "device/nccl_wait.hpp"

#include <sstream>

#include "strider/core/error.hpp"

namespace strider::detail {

void wait_for_nccl_operation(const NcclWaitHooks& hooks, double timeout_s, const std::string& what) {
  NcclPoll poll;
  double waited_s = 0.0;
  bool timed_out = false;
  try {
    const double start_s = hooks.now_s();
    while (true) {
      poll = hooks.poll();
      if (poll.state == NcclPoll::State::done) return;
      if (poll.state == NcclPoll::State::failed) break;
      waited_s = hooks.now_s() - start_s;
      if (timeout_s > 0 && waited_s > timeout_s) {
        timed_out = true;
        break;
      }
      hooks.pause();
    }
  } catch (...) {
    hooks.abort();  // a poll that throws (a CUDA error) leaves the communicator unusable too
    throw;
  }
  hooks.abort();
  if (timed_out) {
    std::ostringstream reason;
    reason << what << " made no progress for " << waited_s << " s (STRIDER_NCCL_TIMEOUT_S=" << timeout_s
           << "); a peer rank probably failed; the NCCL communicator was aborted";
    STRIDER_THROW(NcclError, reason.str());
  }
  throw NcclError(ErrorContext{"ncclCommGetAsyncError", relative_source_path(__FILE__), __LINE__, -1, poll.code,
                               what + ": " + poll.error + "; the NCCL communicator was aborted"});
}

}  // namespace strider::detail
