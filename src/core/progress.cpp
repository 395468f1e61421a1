#include "strider/core/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "strider/core/error.hpp"

namespace strider {

std::string short_duration(double seconds) {
  const auto total = static_cast<std::int64_t>(std::llround(std::max(0.0, seconds)));
  char text[32];
  if (total < 60)
    std::snprintf(text, sizeof text, "%llds", static_cast<long long>(total));
  else if (total < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  else
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(total / 3600),
                  static_cast<long long>(total % 3600 / 60));
  return text;
}

std::string progress_line(const ProgressPoint& point, double seconds, std::int64_t steps_done) {
  std::ostringstream line;
  line << "progress: epoch " << point.epoch + 1;
  if (point.epochs > 0) line << "/" << point.epochs;
  line << ", step " << point.step;
  if (point.steps > 0) line << "/" << point.steps << " (" << 100 * point.step / point.steps << "%)";
  const double rate = seconds > 0 ? static_cast<double>(point.samples) / seconds : 0.0;
  line << ", " << std::llround(rate) << " samples/s";
  char stall[16];
  std::snprintf(stall, sizeof stall, "%.1f", seconds > 0 ? 100 * point.stall_seconds / seconds : 0.0);
  line << ", stall " << stall << "%";
  if (point.steps_left >= 0 && steps_done > 0)
    line << ", ETA "
         << short_duration(seconds / static_cast<double>(steps_done) * static_cast<double>(point.steps_left));
  return line.str();
}

ProgressReporter::ProgressReporter(double interval_seconds)
    : interval_(interval_seconds > 0 && std::isfinite(interval_seconds) ? interval_seconds : 0.0),
      start_(Clock::now()),
      next_(start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_))) {}

bool ProgressReporter::step_due() noexcept {
  ++steps_done_;
  return interval_ > 0 && Clock::now() >= next_;
}

void ProgressReporter::print(const ProgressPoint& point) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::cerr << "strider: " << progress_line(point, seconds, steps_done_) << std::endl;
  next_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_));
}

double progress_interval(bool given, double seconds, bool disabled, double terminal_seconds) {
  if (given && disabled) STRIDER_THROW(UsageError, "--progress and --no-progress: give one or the other");
  if (given && !(seconds > 0 && std::isfinite(seconds)))
    STRIDER_THROW(UsageError, "--progress takes a positive number of seconds");
  if (disabled) return 0.0;
  if (given) return seconds;
  return ::isatty(STDERR_FILENO) ? terminal_seconds : 0.0;
}

}  // namespace strider
