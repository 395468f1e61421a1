#include "strider/train/watchdog.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "strider/core/error.hpp"

namespace strider {
namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

StepWatchdog::StepWatchdog(double timeout_seconds, std::string timeout_name)
    : timeout_seconds_(timeout_seconds), timeout_name_(std::move(timeout_name)) {
  // When every rank is stuck (one in its read, the others in the collective), rank 0 fires first and
  // its MPI_Abort ends the others before their own watchdogs fire: one line, not one per rank. The
  // other ranks still fire 5 s later in case rank 0 cannot.
  stagger_ns_ = current_world_rank() > 0 ? 5000000000LL : 0;
  if (timeout_seconds_ > 0) thread_ = std::thread([this] { watch(); });
}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StepWatchdog::step_started(std::int64_t epoch, std::int64_t step) noexcept {
  epoch_.store(epoch, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  deadline_ns_.store(now_ns() + static_cast<std::int64_t>(timeout_seconds_ * 1e9), std::memory_order_release);
}

void StepWatchdog::pause() noexcept {
  deadline_ns_.store(0, std::memory_order_release);
}

void StepWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    const std::int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
    if (stopping_ || deadline == 0 || now_ns() < deadline + stagger_ns_) continue;
    char timeout_text[32];
    std::snprintf(timeout_text, sizeof timeout_text, "%g", timeout_seconds_);
    const std::string line = "strider: error: [rank " + std::to_string(current_world_rank()) + "] step " +
                             std::to_string(step_.load()) + " of epoch " + std::to_string(epoch_.load()) +
                             " did not finish within " + timeout_text + " s (" + timeout_name_ +
                             "): a read or a collective is stuck on this rank or another; aborting the job\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    // Let the launcher forward this line before its own abort banner.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace strider
