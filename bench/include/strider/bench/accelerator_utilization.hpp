#pragma once
/// \file
/// Accelerator utilization (AU) as MLPerf Storage and the DLIO benchmark define it: the time an
/// emulated accelerator spends computing over the total time, each epoch's first step left out; and
/// what the storage delivered over the same windows. A trace of steps per rank goes in; no barrier
/// per step is needed (or wanted: DLIO has none). Pure functions: no MPI, thread-safe.

#include <cstdint>
#include <vector>

namespace strider {

/// One step of a training loop on one rank, in seconds on one steady clock.
struct StepTiming {
  std::int64_t epoch = 0;
  double requested_s = 0.0;      ///< the loop asked for the step's batch
  double compute_start_s = 0.0;  ///< the batch was there: the step's compute began
  double compute_end_s = 0.0;    ///< the compute ended
  std::int64_t samples = 0;      ///< samples in the batch
  std::int64_t bytes = 0;        ///< their bytes
};

/// One epoch's AU window on one rank: from the end of the epoch's first step (left out, as DLIO
/// does: it waits for a pipeline that starts with the epoch) to the end of its last step, with the
/// compute time, samples and bytes of the steps inside.
struct EpochWindow {
  std::int64_t epoch = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  double computing_s = 0.0;
  std::int64_t samples = 0;
  std::int64_t bytes = 0;
  std::int64_t steps = 0;
};

/// The windows of `steps` (in the order they ran; an epoch is a run of equal `epoch`), for every
/// epoch with at least two steps and a window longer than zero.
std::vector<EpochWindow> epoch_windows(const std::vector<StepTiming>& steps);

/// One rank's AU (0..1): the mean over its windows of computing_s / (end_s - start_s) (DLIO averages
/// epochs); 0 without windows.
double accelerator_utilization(const std::vector<EpochWindow>& windows);

/// The job's figures from every rank's windows.
struct UtilizationSummary {
  double au = 0.0;            ///< the mean of the ranks' AU (what MLPerf compares with the threshold)
  double au_min = 0.0;        ///< the lowest rank's
  double au_threshold = 0.0;  ///< the threshold it was compared with
  bool passed = false;        ///< au >= au_threshold
  /// Per epoch, the sum over ranks of each rank's samples (bytes) over its own window, averaged over
  /// epochs: DLIO's throughput, what the storage delivered while the accelerators ran. Windows are
  /// not aligned across ranks (each starts after its own first step), so with few steps per epoch
  /// this is an estimate; it is exact when the ranks' windows coincide.
  double samples_per_s = 0.0;
  double bytes_per_s = 0.0;
};

/// `ranks[r]` holds rank r's windows. Empty (or no window anywhere): all 0, not passed.
UtilizationSummary summarize_utilization(const std::vector<std::vector<EpochWindow>>& ranks, double threshold);

}  // namespace strider
