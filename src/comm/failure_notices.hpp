#pragma once
// Failure notices between the ranks of a communicator, without a collective: a rank that fails while
// the others wait on something MPI cannot see (an NCCL operation, a device) tells every other rank at
// once, and they stop within one poll instead of at a timeout. Each rank keeps one receive posted on a
// private duplicate of the communicator, so that notices never match the caller's own messages.
//
//   FailureNotices notices(comm);                       // collective, once
//   while (waiting) {
//     if (auto notice = notices.poll()) give up: notice->rank failed with notice->reason
//     if (failed here) { notices.notify(reason); give up }
//   }

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "strider/comm/communicator.hpp"

namespace strider::detail {

/// What a failing rank said.
struct FailureNotice {
  int rank = -1;       ///< the failing rank (in the communicator given to the constructor)
  std::string reason;  ///< its message (at most FailureNotices::kMaxReasonBytes bytes)
};

/// The notices of one communicator. One thread at a time; move-only through its owner.
class FailureNotices {
 public:
  /// The longest reason sent; longer ones are cut.
  static constexpr int kMaxReasonBytes = 1024;

  /// Collective over comm: every rank must call. Duplicates comm and posts this rank's receive.
  explicit FailureNotices(const Communicator& comm);
  /// Cancels the posted receive and completes the sends. Never throws.
  ~FailureNotices();
  FailureNotices(const FailureNotices&) = delete;
  FailureNotices& operator=(const FailureNotices&) = delete;

  /// Sends `reason` to every other rank, the first time only (later calls do nothing). Not
  /// collective, never blocks on a peer; errors are logged, not thrown (it runs while failing).
  void notify(const std::string& reason) noexcept;

  /// The first notice that arrived from another rank, if any; the same one on later calls. Not
  /// collective, never blocks. Throws MpiError if MPI fails.
  std::optional<FailureNotice> poll();

  /// True once notify() ran on this rank.
  bool notified() const noexcept { return notified_; }

 private:
  Communicator comm_;
  std::vector<char> incoming_;
  MPI_Request receive_ = MPI_REQUEST_NULL;
  std::optional<FailureNotice> received_;
  std::string outgoing_;
  std::vector<MPI_Request> sends_;
  bool notified_ = false;
};

}  // namespace strider::detail
