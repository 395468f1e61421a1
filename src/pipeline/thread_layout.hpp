#pragma once
// The ranks' agreement on the thread layout (LoaderOptions::measure_thread_layout): every rank
// measures both layouts on its own; the Loader then makes all use the one that serves the job.

#include "strider/pipeline/prefetcher.hpp"

namespace strider {
class Communicator;
}

namespace strider::pipeline_detail {

/// Whether reading on the consumer's thread is kept for these times per step: only when it is
/// below the I/O thread's by more than 5% (on a tie the I/O thread stays, since it also absorbs a
/// slow read without stalling a step). One rule for a rank's own measurement and for the ranks'.
inline bool keeps_caller_thread(double io_thread_us_per_step, double caller_thread_us_per_step) {
  constexpr double kMargin = 0.05;
  return caller_thread_us_per_step < (1 - kMargin) * io_thread_us_per_step;
}

/// The layout every rank uses, and the times per step it was chosen by.
struct AgreedLayout {
  bool caller_thread = false;            ///< every rank reads on its consumer's thread
  double io_thread_us_per_step = 0;      ///< the slowest rank's, reading ahead on the I/O thread
  double caller_thread_us_per_step = 0;  ///< the slowest rank's, reading on the consumer's thread
};

/// Collective over comm, once every rank's measurement is decided: a step waits for the slowest
/// rank, so each layout counts with its slowest rank's time per step, and keeps_caller_thread
/// decides for every rank. Ranks that each kept their own faster layout could otherwise end up
/// mixed, which none of them measured (w1 at 2 ranks on 2 cores with a CPU-bound step of 2x the
/// read: one rank on each layout stalled 26%, both on the I/O thread 7%).
AgreedLayout agree_thread_layout(const Communicator& comm, const LayoutMeasurement& mine);

}  // namespace strider::pipeline_detail
