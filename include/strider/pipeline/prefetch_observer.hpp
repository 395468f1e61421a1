#pragma once
/// \file
/// The pipeline's one hook for measuring it: a PrefetchObserver receives the prefetcher's read,
/// deliver and wait events and the Loader's epoch plans, and adds up whatever account it wants.
/// strider's bench (bench/include/strider/bench/prefetch_account.hpp) subscribes one for its
/// per-batch account; a trainer logs PrefetchStats and needs none.
///
///   auto account = std::make_shared<MyObserver>();
///   options.diagnostics.observer = account;   // LoaderOptions (or PrefetcherOptions::observer)
///
/// Events come from the I/O thread, the consumer's thread and the Loader's planning thread, and
/// two may arrive at once: an observer synchronizes its own state. They are called with the
/// prefetcher's lock held (the plan event excepted): keep them short, never block in them, and
/// never call the Prefetcher or the Loader from them. An observer must not throw. Without one, no
/// event is made and the I/O thread's usage (two system calls per idle spell) is not read.

#include <cstdint>

namespace strider {

/// One read into the ring: `steps` consecutive batches, one call into the reader. Wall-clock
/// seconds of the thread that read; on a loaded machine they include time it was preempted.
struct PrefetchReadEvent {
  std::int64_t steps = 0;      ///< batches read
  bool caller_thread = false;  ///< read on the consumer's thread (no I/O thread, or that layout kept)
  double seconds = 0;          ///< the whole read (PrefetchStats::io_seconds counts it too)
  double plan_seconds = 0;     ///< computing the batches' indices (Sampler::batch); part of seconds
  double copy_seconds = 0;     ///< inside the reader: samples, and labels gathered with them
  double labels_seconds = 0;   ///< inside the reader: labels read apart from the samples
  double handoff_seconds = 0;  ///< the I/O thread after the read: locking, queueing, waking (0 on the caller's)
};

/// One batch handed to the consumer by next() (an error it rethrows instead sends none).
struct PrefetchDeliverEvent {
  double handoff_seconds = 0;  ///< the consumer inside next(), neither waiting nor reading
  bool slept = false;          ///< next() blocked until the I/O thread woke it
};

/// The I/O thread's wait for a free buffer or for an epoch (no CPU): an event at each wake-up
/// (wakeups 1, seconds 0; one that finds nothing to read included) and one when the wait ends
/// (seconds: the whole wait, wakeups 0).
struct PrefetchIdleEvent {
  double seconds = 0;
  std::int64_t wakeups = 0;
};

/// The I/O thread's own usage since its previous usage event (or since it started): sent before it
/// sleeps and when it reads an epoch's last batch, so an account is current whenever the thread
/// is idle.
struct PrefetchIoUsageEvent {
  double cpu_seconds = 0;                 ///< user + system
  std::int64_t voluntary_switches = 0;    ///< it blocked
  std::int64_t involuntary_switches = 0;  ///< it was preempted
};

/// The Loader planned a whole epoch (Sampler::set_epoch), on whichever thread planned it. Plans a
/// sampler makes on its own are not sent: epoch 0's as it is made, and a resumed epoch's
/// (Loader::resume).
struct PrefetchPlanEvent {
  std::int64_t epoch = 0;
  /// The planning thread's CPU time for it (with any part of the next epoch's plan made meanwhile).
  double cpu_seconds = 0;
  /// 1 when this rank copied the epoch's order, or its plan (bucketed: its own batches), from its node's
  /// (LoaderDiagnostics::plan_per_node).
  std::int64_t orders_copied = 0;
};

/// Receives the events above; each default does nothing.
class PrefetchObserver {
 public:
  virtual ~PrefetchObserver() = default;
  virtual void on_read(const PrefetchReadEvent& /*event*/) noexcept {}
  virtual void on_deliver(const PrefetchDeliverEvent& /*event*/) noexcept {}
  virtual void on_idle(const PrefetchIdleEvent& /*event*/) noexcept {}
  virtual void on_io_usage(const PrefetchIoUsageEvent& /*event*/) noexcept {}
  virtual void on_plan(const PrefetchPlanEvent& /*event*/) noexcept {}
};

}  // namespace strider
