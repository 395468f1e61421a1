#pragma once
/// \file
/// strider-bench's per-batch account: where a rank's reading time goes (computing indices, copying,
/// labels, handing batches between threads, idling), how often its threads slept and switched, and
/// what planning epochs cost, summed from the pipeline's events (strider/pipeline/prefetch_observer.hpp).
///
///   auto account = std::make_shared<strider::PrefetchAccount>();
///   options.diagnostics.observer = account;      // LoaderOptions, before the Loader is built
///   ... loader.reset_stats(); account->reset();  // together, where the measurement starts
///   const strider::PrefetchAccountFigures figures = account->figures();

#include <cstdint>
#include <mutex>

#include "strider/pipeline/prefetch_observer.hpp"

namespace strider {

/// The account's sums since construction or reset(). Wall-clock seconds of the thread named; on a
/// loaded machine they include time it was preempted.
struct PrefetchAccountFigures {
  double plan_seconds = 0;     ///< computing each batch's indices (Sampler::batch); part of the reads
  double copy_seconds = 0;     ///< inside the reader: samples, and labels gathered with them
  double labels_seconds = 0;   ///< inside the reader: labels read apart from the samples
  double handoff_seconds = 0;  ///< the I/O thread between reads: locking, queueing a batch, waking the consumer
  double io_idle_seconds = 0;  ///< the I/O thread waiting for a free buffer or for an epoch (no CPU)
  double consumer_handoff_seconds = 0;       ///< the consumer inside next(), not waiting and not reading
  double io_thread_cpu_seconds = 0;          ///< CPU time (user + system) of the I/O thread
  std::int64_t consumer_sleeps = 0;          ///< times next() blocked until the I/O thread woke it
  std::int64_t io_wakeups = 0;               ///< times the I/O thread was woken (to sleep again included)
  std::int64_t io_voluntary_switches = 0;    ///< the I/O thread's context switches: it blocked
  std::int64_t io_involuntary_switches = 0;  ///< ... it was preempted
  std::int64_t caller_thread_batches = 0;    ///< batches read on the consumer's thread
  double epoch_plan_cpu_seconds = 0;         ///< CPU time planning whole epochs (Sampler::set_epoch), any thread
  std::int64_t epoch_orders_copied = 0;      ///< epochs whose order or plan this rank copied from its node's
};

/// A PrefetchObserver that adds the events up; safe to read while the pipeline runs.
class PrefetchAccount final : public PrefetchObserver {
 public:
  void on_read(const PrefetchReadEvent& event) noexcept override;
  void on_deliver(const PrefetchDeliverEvent& event) noexcept override;
  void on_idle(const PrefetchIdleEvent& event) noexcept override;
  void on_io_usage(const PrefetchIoUsageEvent& event) noexcept override;
  void on_plan(const PrefetchPlanEvent& event) noexcept override;

  /// The sums so far.
  PrefetchAccountFigures figures() const;
  /// Starts the sums again (with Loader::reset_stats, where a measurement starts).
  void reset();

 private:
  mutable std::mutex mutex_;
  PrefetchAccountFigures figures_;
};

}  // namespace strider
