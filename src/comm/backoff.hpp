#pragma once
// Waiting for MPI without spinning a core. Open MPI's blocking calls poll until they complete
// (sched_yield per poll with mpi_yield_when_idle): a rank that waits for a slower one takes CPU from
// it wherever ranks share cores with each other or with their I/O threads, which makes the slow
// rank slower still. These waits poll a few times (a balanced wait ends there), yield, then sleep
// in growing pauses. A sleeper's wake-up waits for a core, which on a machine whose cores all run
// (ranks, their I/O and planning threads) can take milliseconds of the scheduler's granularity: the
// small collectives at an epoch's start, which every rank reaches within milliseconds, yield for
// that long first. A yield hands the core to any thread that can run there and returns at once
// when none can.

#include <mpi.h>

#include <chrono>

namespace strider::detail {

/// Pauses between polls: a few immediate retries, then yields (16 of them, or as many as
/// `yield_us` of waiting takes), then sleeps from 2 us doubling to `max_sleep_us`. reset() after
/// progress.
class Backoff {
 public:
  explicit Backoff(int max_sleep_us, int yield_us = 0) : max_sleep_us_(max_sleep_us), yield_us_(yield_us) {}
  void pause();
  void reset() noexcept { polls_ = sleeps_ = 0; }

 private:
  int max_sleep_us_, yield_us_;
  int polls_ = 0, sleeps_ = 0;
  std::chrono::steady_clock::time_point yielding_since_;
};

/// The longest pause of wait_napping(): what a wait may add to a collective's completion.
inline constexpr int kCollectiveMaxSleepUs = 200;
/// How long a collective's wait yields before it sleeps (a wake-up's wait for a busy core is of
/// this order). Measured: the bucketed plan of w3 at 2 ranks on 2 cores, 1.15x the samples/s of
/// sleeping at once (7 interleaved pairs); w1 and w4 within the noise.
inline constexpr int kCollectiveYieldUs = 2000;

/// MPI_Wait by MPI_Test polls with Backoff(kCollectiveMaxSleepUs, kCollectiveYieldUs) pauses. For small collectives
/// only: MPI progresses a request only inside a call, so a large transfer would stall while this
/// sleeps. Returns MPI_Test's error code (MPI_SUCCESS once complete).
int wait_napping(MPI_Request& request);

}  // namespace strider::detail
