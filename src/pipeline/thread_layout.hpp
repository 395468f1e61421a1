#pragma once
// The ranks' agreement on the thread layout (LoaderOptions::measure_thread_layout): every rank
// measures both layouts on its own; the Loader then makes all use the one that serves the job.

#include "strider/comm/communicator.hpp"
#include "strider/pipeline/prefetcher.hpp"

namespace strider::pipeline_detail {

/// The layout every rank uses, and the times per step it was chosen by.
struct AgreedLayout {
  bool caller_thread = false;            ///< every rank reads on its consumer's thread
  double io_thread_us_per_step = 0;      ///< the slowest rank's, reading ahead on the I/O thread
  double caller_thread_us_per_step = 0;  ///< the slowest rank's, reading on the consumer's thread
};

/// Collective over comm, once every rank's measurement is decided: a step waits for the slowest
/// rank, so each layout counts with its slowest rank's time per step, and the consumer's thread
/// is chosen for every rank only when that is below the I/O thread's by more than
/// kThreadLayoutMargin. Ranks that each kept their own faster layout could otherwise end up mixed,
/// which none of them measured (w1 at 2 ranks on 2 cores with a CPU-bound step of 2x the read:
/// one rank on each layout stalled 26%, both on the I/O thread 7%).
AgreedLayout agree_thread_layout(const Communicator& comm, const LayoutMeasurement& mine);

}  // namespace strider::pipeline_detail
