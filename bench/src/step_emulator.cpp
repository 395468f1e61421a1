#include "strider/bench/step_emulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

namespace strider {

namespace {

using Clock = std::chrono::steady_clock;

/// A dependent chain of integer operations the compiler cannot fold away.
std::uint64_t spin(std::int64_t iterations, std::uint64_t state) {
  for (std::int64_t i = 0; i < iterations; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
  }
  return state;
}

}  // namespace

StepEmulator::StepEmulator(double microseconds, std::string mode)
    : microseconds_(microseconds), mode_(std::move(mode)) {
  if (mode_ == "work" && microseconds_ > 0) iterations_ = calibrate();
}

void StepEmulator::run() {
  if (microseconds_ <= 0) return;
  if (mode_ == "work") {
    sink_ = spin(iterations_, sink_);
    return;
  }
  const auto end = Clock::now() + std::chrono::nanoseconds(static_cast<std::int64_t>(microseconds_ * 1000));
  if (mode_ == "sleep") {
    std::this_thread::sleep_until(end);
    return;
  }
  while (Clock::now() < end) {
  }
}

std::int64_t StepEmulator::calibrate() {
  constexpr std::int64_t trial = 1 << 20;
  double best = 1e30;
  for (int attempt = 0; attempt < 7; ++attempt) {
    const Clock::time_point start = Clock::now();
    sink_ = spin(trial, sink_ + 1);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return std::max<std::int64_t>(1, std::llround(microseconds_ * 1e-6 / (best / trial)));
}

}  // namespace strider
