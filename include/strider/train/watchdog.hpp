#pragma once
/// \file
/// A step watchdog: when one step (its I/O or a collective) takes longer than a limit, the job is
/// aborted with a line naming the rank and the step, instead of hanging until the allocation ends.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace strider {

/// Watches the progress of the training loop from a background thread. When more than
/// `timeout_seconds` pass between two calls of step_started(), it prints
/// "strider: error: [rank r] step S of epoch E did not finish within T s (NAME): ..." and calls
/// MPI_Abort on MPI_COMM_WORLD, which ends every rank. Ranks other than 0 wait 5 s longer, so that
/// when all ranks are stuck (one in its read, the others in the collective) one line is printed,
/// not R.
class StepWatchdog {
 public:
  /// timeout_seconds <= 0 disables the watchdog. `timeout_name` is how the message names the
  /// setting that gave the timeout (strider-train: "--step-timeout-s").
  explicit StepWatchdog(double timeout_seconds, std::string timeout_name = "the step timeout");
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  /// Marks the start of (epoch, step). Cheap: an atomic store and no lock.
  void step_started(std::int64_t epoch, std::int64_t step) noexcept;
  /// Suspends the watch (checkpoint writing, evaluation): those are not steps.
  void pause() noexcept;

 private:
  void watch();
  double timeout_seconds_;
  std::string timeout_name_;
  std::atomic<std::int64_t> epoch_{0};
  std::atomic<std::int64_t> step_{-1};
  std::atomic<std::int64_t> deadline_ns_{0};  // 0: paused
  std::int64_t stagger_ns_ = 0;               // extra wait of this rank (see the class comment)
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace strider
