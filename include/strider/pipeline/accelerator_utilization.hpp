#pragma once
/// \file
/// Accelerator utilization (AU) as MLPerf Storage and the DLIO benchmark define it: the time an
/// emulated accelerator spends computing over the total time, each epoch's first step left out; and
/// the throughput over the same window. A trace of steps per rank goes in; no barrier per step is
/// needed (or wanted: DLIO has none). Pure functions: no MPI, thread-safe.

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

/// One rank's figures over its steps. Per epoch (a run of steps with equal `epoch`, in the order
/// they ran) the first step is left out, as DLIO does (it waits for a pipeline that starts with the
/// epoch), and the window is from that step's compute_end to the epoch's last compute_end:
///   AU(epoch) = sum of (compute_end - compute_start) over the other steps / window
///   samples_per_s(epoch) = their samples / window (bytes_per_s alike)
/// Each figure is the mean over the epochs that have at least two steps (DLIO averages epochs).
struct RankUtilization {
  double au = 0.0;  ///< 0..1; 0 when no epoch has two steps
  double samples_per_s = 0.0;
  double bytes_per_s = 0.0;
  std::int64_t counted_steps = 0;  ///< steps inside the windows
};
RankUtilization accelerator_utilization(const std::vector<StepTiming>& steps);

/// The job's figures from every rank's.
struct UtilizationSummary {
  double au = 0.0;             ///< the mean over ranks (what MLPerf compares with the threshold)
  double au_min = 0.0;         ///< the lowest rank's
  double au_threshold = 0.0;   ///< the threshold it was compared with
  bool passed = false;         ///< au >= au_threshold
  double samples_per_s = 0.0;  ///< the sum over ranks of their windows' rates
  double bytes_per_s = 0.0;
};

/// Mean and minimum AU, pass/fail against `threshold`, and the summed rates of `ranks` (empty: all
/// 0, not passed).
UtilizationSummary summarize_utilization(const std::vector<RankUtilization>& ranks, double threshold);

}  // namespace strider
