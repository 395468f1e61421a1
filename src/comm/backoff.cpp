#include "comm/backoff.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace strider::detail {

namespace {

/// This thread's yield before sleeping in small collectives: the innermost YieldingWaits' (0: none).
thread_local int yield_us_here = 0;

/// Short sleeps need a small timer slack (the default, 50 us, makes every sleep that long). Set
/// once per thread; only this thread's timers are affected.
void use_fine_timer_slack() noexcept {
  thread_local bool done = false;
  if (!done) {
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);  // nanoseconds
    done = true;
  }
}

}  // namespace

void Backoff::pause() {
  ++polls_;
  if (polls_ <= 8) return;  // poll again at once: a reply is usually microseconds away
  if (polls_ == 9) yielding_since_ = std::chrono::steady_clock::now();
  if (polls_ <= 24 || (sleeps_ == 0 && yield_us_ > 0 &&
                       std::chrono::steady_clock::now() - yielding_since_ < std::chrono::microseconds(yield_us_))) {
    std::this_thread::yield();
    return;
  }
  use_fine_timer_slack();
  const int doublings = std::min(sleeps_++, 16);
  const int sleep_us = std::min(max_sleep_us_, 2 << doublings);
  std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
}

YieldingWaits::YieldingWaits(int yield_us) noexcept : outer_us_(yield_us_here) {
  yield_us_here = yield_us;
}

YieldingWaits::~YieldingWaits() {
  yield_us_here = outer_us_;
}

int collective_yield_us() noexcept {
  return yield_us_here;
}

int wait_napping(MPI_Request& request) {
  Backoff backoff(kCollectiveMaxSleepUs, collective_yield_us());
  for (;;) {
    int done = 0;
    const int code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS || done) return code;
    backoff.pause();
  }
}

}  // namespace strider::detail
