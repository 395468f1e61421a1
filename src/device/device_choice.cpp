#include "device/device_choice.hpp"

#include "strider/core/error.hpp"
#include "strider/device/gpu_binding.hpp"

namespace strider::detail {

DeviceChoice choose_device_kind(const std::string& choice, const GpuProbe& probe, int local_rank,
                                const std::string& subject, const std::string& option) {
  STRIDER_REQUIRE(choice == "auto" || choice == "cpu" || choice == "cuda",
                  option + " must be auto, cpu or cuda, got '" + choice + "'");
  DeviceChoice result;
  if (choice == "cpu") {
    result.why = "cpu " + subject + ": requested with " + option + " cpu";
    return result;
  }
  if (probe.status == GpuStatus::usable && probe.device_count > 0) {
    result.cuda = true;
    result.device = choose_device(local_rank, probe.device_count);
    result.why = "cuda " + subject + ": " + std::to_string(probe.device_count) +
                 " visible device(s), node-local rank " + std::to_string(local_rank) + " binds device " +
                 std::to_string(result.device);
    return result;
  }
  if (choice == "cuda") {
    if (probe.status == GpuStatus::not_built) STRIDER_THROW(UsageError, option + " cuda: " + probe.reason);
    STRIDER_THROW(UsageError, option + " cuda: no usable GPU (" + probe.reason + ")");
  }
  result.why = "cpu " + subject + ": no usable GPU (" + probe.reason + ")";
  if (probe.gpu_unusable) {
    result.warning = "a GPU is present but cannot be used: " + probe.reason + "; using the CPU " + subject +
                     " instead (" + option + " cuda makes this an error, " + option + " cpu silences it)";
  }
  return result;
}

DeviceChoice choose_device_kind(const std::string& choice, const Communicator& comm, const std::string& subject,
                                const std::string& option) {
  if (choice == "cpu") return choose_device_kind(choice, GpuProbe{}, comm.local_rank(), subject, option);
  return choose_device_kind(choice, probe_gpus(), comm.local_rank(), subject, option);
}

}  // namespace strider::detail
