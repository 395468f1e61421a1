#pragma once
/// \file
/// Accelerator utilization (AU) as MLPerf Storage and the DLIO benchmark define it: the time an
/// emulated accelerator spends computing over the total time, each epoch's first step left out. A
/// trace of steps per rank goes in; no barrier per step is needed (or wanted: DLIO has none). Pure
/// functions: no MPI, thread-safe.

#include <cstdint>
#include <vector>

namespace strider {

/// One step of a training loop on one rank, in seconds on one steady clock.
struct StepTiming {
  std::int64_t epoch = 0;
  double requested_s = 0.0;      ///< the loop asked for the step's batch
  double compute_start_s = 0.0;  ///< the batch was there: the step's compute began
  double compute_end_s = 0.0;    ///< the compute ended
};

/// The AU of one rank (0..1). Per epoch (a run of steps with equal `epoch`, in the order they ran),
/// its first step is left out, as DLIO does: it waits for a pipeline that starts with the epoch.
///   AU(epoch) = sum of (compute_end - compute_start) over the epoch's other steps
///               / (the epoch's last compute_end - its first step's compute_end)
/// The rank's AU is the mean over its epochs that have at least two steps (DLIO averages the
/// epochs); 0 when no epoch has two.
double accelerator_utilization(const std::vector<StepTiming>& steps);

/// The job's AU from every rank's.
struct UtilizationSummary {
  double au = 0.0;            ///< the mean over ranks (what MLPerf compares with the threshold)
  double au_min = 0.0;        ///< the lowest rank's
  double au_threshold = 0.0;  ///< the threshold it was compared with
  bool passed = false;        ///< au >= au_threshold
};

/// Mean, minimum and pass/fail of `per_rank_au` (empty: au and au_min 0, not passed).
UtilizationSummary summarize_utilization(const std::vector<double>& per_rank_au, double threshold);

}  // namespace strider
