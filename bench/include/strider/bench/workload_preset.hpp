#pragma once
/// \file
/// MLPerf-Storage-style training workloads: the DLIO benchmark's H100 configurations of unet3d,
/// resnet50 and cosmoflow, as a sample size, a batch size and a compute time per step of an emulated
/// accelerator, with the accelerator utilization (AU) a run must reach. strider-gen writes files of
/// such samples (--workload), strider-bench runs them (--workload, with the AU of
/// accelerator_utilization.hpp). Pure data: no MPI, thread-safe.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strider {

/// One workload: what one emulated accelerator reads and computes per step.
struct WorkloadPreset {
  std::string name;                    ///< "unet3d", "resnet50" or "cosmoflow"
  std::int64_t dlio_sample_bytes = 0;  ///< DLIO's record length (its mean, where records vary)
  /// dlio_sample_bytes rounded up to a multiple of kDirectIoAlignmentBytes, so that O_DIRECT reads
  /// whole rows (every row of a file aligned to that boundary starts on one).
  std::int64_t sample_bytes = 0;
  std::int64_t batch_size = 0;   ///< samples per accelerator per step
  double compute_seconds = 0.0;  ///< one step's compute on an H100
  double au_threshold = 0.0;     ///< the least mean AU (0..1) a run must reach to pass
  /// Bytes one accelerator reads per step.
  std::int64_t batch_bytes() const noexcept { return sample_bytes * batch_size; }
};

/// Every preset, in a fixed order (unet3d, resnet50, cosmoflow).
const std::vector<WorkloadPreset>& workload_presets();

/// The preset called `name`; throws UsageError naming the known ones.
const WorkloadPreset& workload_preset(std::string_view name);

/// The presets' names joined by `separator` ("unet3d|resnet50|cosmoflow"), for help texts.
std::string workload_preset_names(std::string_view separator = "|");

}  // namespace strider
