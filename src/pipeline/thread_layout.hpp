#pragma once
// The ranks' agreement on the thread layout (LoaderOptions::measure_thread_layout): every rank
// measures both layouts on its own; the Loader then makes all use the one that serves the job.

#include <algorithm>
#include <cstdint>

#include "strider/pipeline/prefetcher.hpp"

namespace strider {
class Communicator;
}

namespace strider::pipeline_detail {

/// Whether reading on the consumer's thread is kept for these times per step. With a core to spare
/// for the I/O thread, only when the consumer's thread is faster by more than 5% (on a tie the I/O
/// thread stays: it also absorbs a slow read without stalling a step). Without one, unless the I/O
/// thread is faster by more than 5%: an I/O thread that must share its rank's core with the step
/// overlaps nothing the step does on that core, and each batch it hands over costs CPU of both
/// threads (w1 at 2 ranks on 2 cores, 3 pairs each: 7-14% more samples/s on the consumer's thread
/// with a CPU-bound step, 10-25% without a step); it still wins clearly where the step waits (a
/// GPU, a sleep), which the measurement shows. One rule for a rank's own measurement and for the
/// ranks'.
inline bool keeps_caller_thread(double io_thread_us_per_step, double caller_thread_us_per_step, bool spare_core) {
  constexpr double kMargin = 0.05;
  if (spare_core) return caller_thread_us_per_step < (1 - kMargin) * io_thread_us_per_step;
  return !(io_thread_us_per_step < (1 - kMargin) * caller_thread_us_per_step);
}

/// The steps a timed layout block read: those it delivered, less those the ring held ready when it
/// began, plus those it holds at its end (at least 1). A consumer faster than the reads sleeps until
/// half the ring is ready, so an I/O-thread block may begin with up to half a ring read before it:
/// counted as delivered, the I/O thread looked 10-20% faster than it reads (w3 at 1 rank, a ring of
/// 64 and blocks of 128 steps, which began with 31-49 steps ready and ended with 0-31) and was kept
/// in about half the runs, though the consumer's thread gave 20-25% more samples/s.
inline std::int64_t steps_read_in_block(std::int64_t delivered, std::int64_t ready_at_start,
                                        std::int64_t ready_at_end) {
  return std::max<std::int64_t>(1, delivered + ready_at_end - ready_at_start);
}

/// Whether the Loader plans each next epoch ahead, on a thread of its own while the epoch before is
/// read, rather than on the caller's thread when the epoch starts. Ahead, unless the rank has no
/// core to spare and reads on its consumer's thread (io_thread off, or kept by the layout
/// measurement, which keeps it there only where the step leaves no wait an I/O thread could fill):
/// no core then idles for the plan-ahead thread, whose turns fall in the middle of the reads, and
/// the node's ranks make their parts of a bucketed plan at once when the epoch starts (w3 at 2
/// ranks on 2 cores: 3% more samples/s, 8 pairs). Ahead still where one rank makes what the
/// node's others wait for (`one_rank_plans_for_node`: the distributed sampler's order, shuffled
/// once per node): made at the epoch's start, they would idle through its shuffle (w1 at 2 ranks
/// on 2 cores: 17% fewer samples/s).
inline bool plans_ahead(bool reads_on_caller_thread, bool spare_core, bool one_rank_plans_for_node) {
  return spare_core || !reads_on_caller_thread || one_rank_plans_for_node;
}

/// The cores a rank can count on: those its affinity mask allows, and no more than its share of
/// the node's online cores (ranks not bound to cores share them all).
inline int cores_per_rank(int affinity_cores, int online_cores, int local_ranks) {
  return std::min(affinity_cores, online_cores / std::max(local_ranks, 1));
}

/// Whether this rank has a core for its I/O thread beside its consumer's (cores_per_rank >= 2 with
/// this process's affinity mask and the machine's online cores), `local_ranks` being the job's
/// ranks on this node.
bool has_spare_core(int local_ranks);

/// The layout every rank uses, and the times per step it was chosen by.
struct AgreedLayout {
  bool caller_thread = false;            ///< every rank reads on its consumer's thread
  bool spare_core = true;                ///< every rank has a core to spare (keeps_caller_thread's rule)
  double io_thread_us_per_step = 0;      ///< the slowest rank's, reading ahead on the I/O thread
  double caller_thread_us_per_step = 0;  ///< the slowest rank's, reading on the consumer's thread
};

/// Collective over comm, once every rank's measurement is decided: a step waits for the slowest
/// rank, so each layout counts with its slowest rank's time per step, and keeps_caller_thread
/// decides for every rank, with the rule for no spare core if any rank has none. Ranks that each
/// kept their own faster layout could otherwise end up mixed, which none of them measured (w1 at 2
/// ranks on 2 cores with a CPU-bound step of 2x the read: one rank on each layout stalled 26%, both
/// on the I/O thread 7%).
AgreedLayout agree_thread_layout(const Communicator& comm, const LayoutMeasurement& mine);

}  // namespace strider::pipeline_detail
