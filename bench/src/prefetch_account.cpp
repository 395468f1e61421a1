#include "strider/bench/prefetch_account.hpp"

namespace strider {

void PrefetchAccount::on_read(const PrefetchReadEvent& event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.plan_seconds += event.plan_seconds;
  figures_.copy_seconds += event.copy_seconds;
  figures_.labels_seconds += event.labels_seconds;
  figures_.handoff_seconds += event.handoff_seconds;
  if (event.caller_thread) figures_.caller_thread_batches += event.steps;
}

void PrefetchAccount::on_deliver(const PrefetchDeliverEvent& event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.consumer_handoff_seconds += event.handoff_seconds;
  if (event.slept) figures_.consumer_sleeps += 1;
}

void PrefetchAccount::on_idle(const PrefetchIdleEvent& event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.io_idle_seconds += event.seconds;
  figures_.io_wakeups += event.wakeups;
}

void PrefetchAccount::on_io_usage(const PrefetchIoUsageEvent& event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.io_thread_cpu_seconds += event.cpu_seconds;
  figures_.io_voluntary_switches += event.voluntary_switches;
  figures_.io_involuntary_switches += event.involuntary_switches;
}

void PrefetchAccount::on_plan(const PrefetchPlanEvent& event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.epoch_plan_cpu_seconds += event.cpu_seconds;
  figures_.epoch_orders_copied += event.orders_copied;
}

PrefetchAccountFigures PrefetchAccount::figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return figures_;
}

void PrefetchAccount::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_ = PrefetchAccountFigures{};
}

}  // namespace strider
