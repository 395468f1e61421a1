#include "comm/failure_notices.hpp"

#include <algorithm>

#include "strider/core/log.hpp"

namespace strider::detail {
namespace {
constexpr int notice_tag = 7001;
}  // namespace

FailureNotices::FailureNotices(const Communicator& comm)
    : comm_(Communicator::duplicate(comm.native())), incoming_(static_cast<std::size_t>(kMaxReasonBytes)) {
  STRIDER_MPI_CHECK(
      MPI_Irecv(incoming_.data(), kMaxReasonBytes, MPI_CHAR, MPI_ANY_SOURCE, notice_tag, comm_.native(), &receive_),
      "posting the receive of failure notices");
}

FailureNotices::~FailureNotices() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (receive_ != MPI_REQUEST_NULL) {
    // A receive that already matched completes; one that did not is cancelled. Either way it ends.
    if (MPI_Cancel(&receive_) != MPI_SUCCESS || MPI_Wait(&receive_, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      log_warn("failure notices: cancelling the posted receive failed");
  }
  // The notices are a few hundred bytes: sent eagerly, so these complete without the peers' help.
  if (!sends_.empty() &&
      MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE) != MPI_SUCCESS)
    log_warn("failure notices: completing the sends failed");
}

void FailureNotices::notify(const std::string& reason) noexcept {
  if (notified_) return;
  notified_ = true;
  try {
    outgoing_ = reason.substr(0, static_cast<std::size_t>(kMaxReasonBytes));
    sends_.reserve(static_cast<std::size_t>(comm_.size()));
    for (int rank = 0; rank < comm_.size(); ++rank) {
      if (rank == comm_.rank()) continue;
      MPI_Request request = MPI_REQUEST_NULL;
      STRIDER_MPI_CHECK(MPI_Isend(outgoing_.data(), static_cast<int>(outgoing_.size()), MPI_CHAR, rank, notice_tag,
                                  comm_.native(), &request),
                        "sending a failure notice to rank " + std::to_string(rank));
      sends_.push_back(request);
    }
  } catch (const std::exception& error) {
    log_warn("failure notices: could not tell every rank: ", error_message(error));
  }
}

std::optional<FailureNotice> FailureNotices::poll() {
  if (received_ || receive_ == MPI_REQUEST_NULL) return received_;
  int arrived = 0;
  MPI_Status status{};
  STRIDER_MPI_CHECK(MPI_Test(&receive_, &arrived, &status), "polling for failure notices");
  if (!arrived) return std::nullopt;
  int bytes = 0;
  STRIDER_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &bytes), "reading a failure notice");
  received_ =
      FailureNotice{status.MPI_SOURCE, std::string(incoming_.data(), static_cast<std::size_t>(std::max(bytes, 0)))};
  return received_;
}

}  // namespace strider::detail
