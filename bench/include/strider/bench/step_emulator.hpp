#pragma once
/// \file
/// The step strider-bench emulates in place of a model (--compute-us, --compute-mode):
///   busy   spins on the clock until `microseconds` have passed: a GPU step the host thread spin-waits
///          for (it ends on time even when the thread was preempted meanwhile);
///   sleep  sleeps that long: a GPU step the host thread blocks on (the CPU is free);
///   work   runs a fixed amount of CPU work calibrated to take that long on an idle core: a CPU-bound
///          step (the CPU backend), which takes longer when it shares its core.
/// One thread runs it.

#include <cstdint>
#include <string>

namespace strider {

class StepEmulator {
 public:
  /// `mode`: busy, sleep or work (checked by the caller); microseconds <= 0: a step of no time.
  /// Calibrates the work mode here, before any clock of the caller starts.
  StepEmulator(double microseconds, std::string mode);
  /// One step.
  void run();

 private:
  /// Iterations that take `microseconds_` on this core: the fastest of several timed trials (the
  /// one least disturbed by other threads).
  std::int64_t calibrate();

  double microseconds_;
  std::string mode_;
  std::int64_t iterations_ = 0;
  std::uint64_t sink_ = 88172645463325252ULL;
};

}  // namespace strider
