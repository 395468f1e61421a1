#pragma once
// Waiting for MPI without spinning a core. Open MPI's blocking calls poll until they complete
// (sched_yield per poll with mpi_yield_when_idle): a rank that waits for a slower one takes CPU from
// it wherever ranks share cores with each other or with their I/O threads, which makes the slow
// rank slower still. These waits poll a few times (a balanced wait ends there), yield, then sleep
// in growing pauses. A sleeper's wake-up waits for a core, which on a machine whose cores all run
// (ranks, their I/O and planning threads) can take milliseconds of the scheduler's granularity: the
// small collectives at an epoch's start, which every rank reaches within milliseconds, yield for
// that long first (YieldingWaits). A yield hands the core to any thread that can run there and
// returns at once when none can.

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
/// How long a wait yields before it sleeps within a YieldingWaits scope (a wake-up's wait for a
/// busy core is of this order).
inline constexpr int kCollectiveYieldUs = 2000;

/// While one lives on a thread, that thread's waits in small collectives (wait_napping and
/// arrive_together) yield for `yield_us` before they sleep. For the collectives every rank reaches
/// within milliseconds of the others and where a late wake-up delays the work after them (the
/// epoch's start: measured, the bucketed plan of w3 at 2 ranks on 2 cores, 1.15x the samples/s of
/// sleeping at once in 7 interleaved pairs; w1 and w4 within the noise). Elsewhere (a training
/// step's agreements, which wait for the slowest rank's step) the waits sleep after a few yields,
/// as a rank that is early should. Nests; the innermost wins.
class YieldingWaits {
 public:
  explicit YieldingWaits(int yield_us) noexcept;
  ~YieldingWaits();
  YieldingWaits(const YieldingWaits&) = delete;
  YieldingWaits& operator=(const YieldingWaits&) = delete;

 private:
  int outer_us_;
};

/// This thread's yield before sleeping in small collectives (YieldingWaits; 0 outside one).
int collective_yield_us() noexcept;

/// MPI_Wait by MPI_Test polls with Backoff(kCollectiveMaxSleepUs, collective_yield_us()) pauses.
/// For small collectives only: MPI progresses a request only inside a call, so a large transfer
/// would stall while this sleeps. Returns MPI_Test's error code (MPI_SUCCESS once complete).
int wait_napping(MPI_Request& request);

}  // namespace strider::detail
