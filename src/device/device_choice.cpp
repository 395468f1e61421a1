#include "device/device_choice.hpp"

#include "strider/config.hpp"
#include "strider/core/error.hpp"
#include "strider/device/gpu_binding.hpp"
#include "strider/device/gpu_probe.hpp"

namespace strider::detail {

DeviceChoice choose_device_kind(const std::string& choice, const Communicator& comm, const std::string& subject,
                                const std::string& option) {
  STRIDER_REQUIRE(choice == "auto" || choice == "cpu" || choice == "cuda",
                  option + " must be auto, cpu or cuda, got '" + choice + "'");
  DeviceChoice result;
  if (choice == "cpu") {
    result.why = "cpu " + subject + ": requested with " + option + " cpu";
    return result;
  }
  const GpuProbe probe = probe_gpus();
  if (choice == "cuda") {
    if (!STRIDER_HAS_CUDA) STRIDER_THROW(UsageError, option + " cuda: " + probe.reason);
    if (probe.device_count == 0) STRIDER_THROW(UsageError, option + " cuda: no usable GPU (" + probe.reason + ")");
  }
  if (STRIDER_HAS_CUDA && probe.device_count > 0) {
    result.cuda = true;
    result.device = choose_device(comm.local_rank(), probe.device_count);
    result.why = "cuda " + subject + ": " + std::to_string(probe.device_count) +
                 " visible device(s), node-local rank " + std::to_string(comm.local_rank()) + " binds device " +
                 std::to_string(result.device);
    return result;
  }
  result.why = "cpu " + subject + ": no usable GPU (" + probe.reason + ")";
  return result;
}

}  // namespace strider::detail
