#include "strider/bench/workload_preset.hpp"

#include "strider/core/error.hpp"
#include "strider/core/option_text.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider {

namespace {

WorkloadPreset preset(std::string name, std::int64_t dlio_sample_bytes, std::int64_t batch_size, double compute_seconds,
                      double au_threshold) {
  const std::int64_t blocks = (dlio_sample_bytes + kDirectIoAlignmentBytes - 1) / kDirectIoAlignmentBytes;
  return WorkloadPreset{std::move(name), dlio_sample_bytes, blocks * kDirectIoAlignmentBytes,
                        batch_size,      compute_seconds,   au_threshold};
}

}  // namespace

const std::vector<WorkloadPreset>& workload_presets() {
  // DLIO's H100 configurations (MLPerf Storage): record length, batch, computation_time, metric.au.
  static const std::vector<WorkloadPreset> presets = {
      preset("unet3d", 146600628, 7, 0.323, 0.90),   // one 3-D volume per sample
      preset("resnet50", 114660, 400, 0.224, 0.90),  // one image record (DLIO: 114,660.07 bytes on average)
      preset("cosmoflow", 2828486, 1, 0.0035, 0.70),
  };
  return presets;
}

const WorkloadPreset& workload_preset(std::string_view name) {
  for (const WorkloadPreset& preset : workload_presets())
    if (preset.name == name) return preset;
  std::vector<std::string> names;
  for (const WorkloadPreset& preset : workload_presets()) names.push_back(preset.name);
  check_choice(name, names, "workload");  // throws: "unknown workload 'x'; did you mean ...? (known: ...)"
  STRIDER_THROW(UsageError, "unknown workload '" + std::string(name) + "'");  // not reached
}

std::string workload_preset_names(std::string_view separator) {
  std::string names;
  for (const WorkloadPreset& preset : workload_presets())
    names += (names.empty() ? "" : std::string(separator)) + preset.name;
  return names;
}

}  // namespace strider
