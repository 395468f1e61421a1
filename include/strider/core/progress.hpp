#pragma once
/// \file
/// A progress line for long runs: one line on stderr every few seconds (step, epoch, samples/s,
/// ETA, stall), so that a terminal, or a batch job's log, shows that the run is alive and how far it
/// is. Rank 0 keeps one; the others pass an interval of 0.

#include <chrono>
#include <cstdint>
#include <string>

namespace strider {

/// Where a run stands when a progress line is printed.
struct ProgressPoint {
  std::int64_t epoch = 0;        ///< counted from 0
  std::int64_t epochs = 0;       ///< in the run; 0: not known
  std::int64_t step = 0;         ///< steps done in this epoch
  std::int64_t steps = 0;        ///< steps in this epoch; 0: not known
  std::int64_t steps_left = -1;  ///< steps left in the run after this one; -1: not known (no ETA)
  std::int64_t samples = 0;      ///< samples since the reporter started, every rank together
  double stall_seconds = 0.0;    ///< this rank's time waiting for batches since the reporter started
};

/// The line for `point`, `seconds` after the start and `steps_done` steps into the run:
/// "progress: epoch 2/5, step 120/400 (30%), 51200 samples/s, stall 3.1%, ETA 1m20s".
std::string progress_line(const ProgressPoint& point, double seconds, std::int64_t steps_done);

/// The seconds `seconds` as "45s", "12m05s" or "3h07m".
std::string short_duration(double seconds);

/// Prints progress_line() to stderr at most once per interval. Not thread-safe: one thread steps it.
class ProgressReporter {
 public:
  /// interval_seconds <= 0: prints nothing. The clock starts now.
  explicit ProgressReporter(double interval_seconds = 0.0);
  bool enabled() const noexcept { return interval_ > 0; }
  /// Counts one step; true when a line is due (the caller then gathers the point and calls print).
  bool step_due() noexcept;
  /// Prints the line for `point` now.
  void print(const ProgressPoint& point);

 private:
  using Clock = std::chrono::steady_clock;
  double interval_ = 0.0;
  Clock::time_point start_;
  Clock::time_point next_;
  std::int64_t steps_done_ = 0;
};

/// The interval for an app's `--progress [SECONDS]` / `--no-progress`: `seconds` when --progress
/// was given (> 0), 0 with --no-progress, else `terminal_seconds` when stderr is a terminal and 0
/// when it is not (a batch job's log takes --progress explicitly).
double progress_interval(bool given, double seconds, bool disabled, double terminal_seconds = 5.0);

}  // namespace strider
