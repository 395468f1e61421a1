#pragma once
// Waiting for MPI without spinning a core. Open MPI's blocking calls poll until they complete
// (sched_yield per poll with mpi_yield_when_idle): a rank that waits for a slower one takes CPU from
// it wherever ranks share cores with each other or with their I/O threads, which makes the slow
// rank slower still. These waits poll a few times (a balanced wait ends there), then sleep in
// growing pauses.

#include <mpi.h>

namespace strider::detail {

/// Pauses between polls: a few immediate retries, then yields, then sleeps from 2 us doubling to
/// `max_sleep_us`. reset() after progress.
class Backoff {
 public:
  explicit Backoff(int max_sleep_us) : max_sleep_us_(max_sleep_us) {}
  void pause();
  void reset() noexcept { polls_ = 0; }

 private:
  int max_sleep_us_;
  int polls_ = 0;
};

/// The longest pause of wait_napping(): what a wait may add to a collective's completion.
inline constexpr int kCollectiveMaxSleepUs = 200;

/// MPI_Wait by MPI_Test polls with Backoff(kCollectiveMaxSleepUs) pauses. For small collectives
/// only: MPI progresses a request only inside a call, so a large transfer would stall while this
/// sleeps. Returns MPI_Test's error code (MPI_SUCCESS once complete).
int wait_napping(MPI_Request& request);

}  // namespace strider::detail
