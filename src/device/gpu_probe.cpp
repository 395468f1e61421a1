// The GPU probe's decision (pure host logic over GpuProbeFacts) and the device-node count; compiled in
// every build. probe_gpus() itself gathers the facts: src/device/cuda/cuda_check.cpp with CUDA,
// below without.
#include "strider/device/gpu_probe.hpp"

#include <sys/stat.h>

#include <string>

namespace strider {
namespace {

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

/// The oldest driver branch that runs a CUDA major version (NVIDIA's compatibility table).
std::string driver_branch_hint(int runtime_version) {
  switch (runtime_version / 1000) {
    case 13:
      return " (driver R580 or newer)";
    case 12:
      return " (driver R525 or newer)";
    default:
      return "";
  }
}

std::string nodes_text(int nodes) {
  return std::to_string(nodes) + " NVIDIA device node" + (nodes == 1 ? "" : "s") + " (/dev/nvidia0" +
         (nodes > 1 ? "..." : "") + ")";
}

GpuProbe unusable(GpuStatus status, std::string reason, bool gpu_present) {
  GpuProbe probe;
  probe.status = status;
  probe.reason = std::move(reason);
  probe.gpu_unusable = gpu_present;
  return probe;
}

}  // namespace

GpuProbe classify_gpu_probe(const GpuProbeFacts& facts) {
  const bool nodes = facts.device_nodes > 0;
  if (!facts.built_with_cuda) {
    std::string reason = "strider was built without CUDA (STRIDER_ENABLE_CUDA=OFF or no nvcc/NCCL)";
    if (nodes) reason = "this machine has " + nodes_text(facts.device_nodes) + ", but " + reason;
    return unusable(GpuStatus::not_built, reason, nodes);
  }
  const int code = facts.count_result;
  if (code == cuda_codes::success && facts.device_count > 0) {
    GpuProbe probe;
    probe.status = GpuStatus::usable;
    probe.device_count = facts.device_count;
    return probe;
  }
  if (code == cuda_codes::insufficient_driver || code == cuda_codes::system_driver_mismatch ||
      code == cuda_codes::compat_not_supported) {
    if (facts.driver_version == 0) {
      if (!nodes) return unusable(GpuStatus::no_driver, "no CUDA driver on this machine", false);
      return unusable(GpuStatus::no_driver,
                      "this machine has " + nodes_text(facts.device_nodes) +
                          ", but no CUDA driver library could be loaded (libcuda.so.1; in a container, is the "
                          "NVIDIA runtime enabled?)",
                      true);
    }
    return unusable(GpuStatus::driver_too_old,
                    "the NVIDIA driver supports CUDA " + cuda_version_text(facts.driver_version) +
                        ", older than the CUDA " + cuda_version_text(facts.runtime_version) +
                        " strider was built with" + driver_branch_hint(facts.runtime_version) +
                        "; update the driver (" + facts.count_result_name + ")",
                    true);
  }
  if (code == cuda_codes::no_device || (code == cuda_codes::success && facts.device_count == 0)) {
    if (facts.visible_devices_set)
      return unusable(GpuStatus::no_device, "no CUDA device visible (CUDA_VISIBLE_DEVICES hides them)", false);
    if (!nodes) return unusable(GpuStatus::no_device, "no CUDA device visible", false);
    return unusable(GpuStatus::no_device,
                    "the CUDA driver shows no device, although this machine has " + nodes_text(facts.device_nodes),
                    true);
  }
  if (code == cuda_codes::devices_unavailable) {
    return unusable(GpuStatus::device_unavailable,
                    "the GPUs are busy or unavailable (cudaErrorDevicesUnavailable: another process holds them in "
                    "exclusive-process compute mode, or their compute mode is prohibited)",
                    true);
  }
  const bool present = nodes || facts.driver_version > 0;
  return unusable(GpuStatus::cuda_error, "CUDA unavailable: " + facts.count_result_name, present);
}

GpuProbe unusable_device_probe(int device, const std::string& error) {
  return unusable(GpuStatus::device_unavailable, "device " + std::to_string(device) + " cannot be used: " + error,
                  true);
}

int count_nvidia_device_nodes(const std::string& dev_directory) {
  int nodes = 0;
  for (int index = 0; index < 64; ++index) {
    struct stat info {};
    const std::string path = dev_directory + "/nvidia" + std::to_string(index);
    if (::stat(path.c_str(), &info) == 0) ++nodes;
  }
  return nodes;
}

#if !STRIDER_HAS_CUDA
std::string gpu_build_versions() {
  return "CUDA none (built without the CUDA backend)";
}

GpuProbe probe_gpus() noexcept {
  try {
    GpuProbeFacts facts;
    facts.built_with_cuda = false;
    facts.device_nodes = count_nvidia_device_nodes();
    return classify_gpu_probe(facts);
  } catch (...) {
    return GpuProbe{0, "strider was built without CUDA", GpuStatus::not_built, false};
  }
}
#endif

}  // namespace strider
