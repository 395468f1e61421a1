#pragma once
/// \file
/// Whether this process can use a GPU, and if not, why: no driver, a driver too old for this build,
/// no device, devices busy or unavailable, or a build without CUDA. The decision is pure host logic
/// over what the CUDA runtime and the machine report (GpuProbeFacts), so that every case is
/// unit-tested without a GPU. No CUDA header: works in every build.

#include <string>

#include "strider/config.hpp"

namespace strider {

/// What a probe found.
enum class GpuStatus {
  usable,              ///< at least one device works
  not_built,           ///< strider was built without CUDA
  no_driver,           ///< no NVIDIA driver (libcuda) is installed or loaded
  driver_too_old,      ///< a driver is loaded, but it is older than the CUDA this build uses
  no_device,           ///< the driver works but shows no device (none, or hidden by CUDA_VISIBLE_DEVICES)
  device_unavailable,  ///< devices exist but cannot be used now (busy in exclusive mode, prohibited)
  cuda_error,          ///< another CUDA error
};

/// The result of probing for CUDA devices.
struct GpuProbe {
  int device_count = 0;  ///< usable CUDA devices (0 when none, no driver, or a CPU-only build)
  std::string reason;    ///< why there is none, in words ("built without CUDA", "no CUDA driver", ...); "" when usable
  GpuStatus status = GpuStatus::not_built;
  /// True when this machine has an NVIDIA GPU that strider cannot use (a driver too old, devices busy,
  /// a CPU-only build on a GPU node, device nodes without a driver library): with `--backend auto`
  /// every rank warns, with `--backend cuda` it is an error. False when the machine shows no GPU, or
  /// CUDA_VISIBLE_DEVICES hides them on purpose.
  bool gpu_unusable = false;
};

/// The CUDA and NCCL this build was compiled against, for --version: "CUDA 12.2, NCCL 2.18.3", or
/// "CUDA none (built without the CUDA backend)". Reads no device.
std::string gpu_build_versions();

/// What a probe saw, as numbers and flags, so that the decision can be tested with each case stood in.
struct GpuProbeFacts {
  bool built_with_cuda = false;
  int count_result = 0;              ///< cudaGetDeviceCount's cudaError_t (0: cudaSuccess)
  std::string count_result_name;     ///< cudaGetErrorName of it ("cudaErrorInsufficientDriver")
  int device_count = 0;              ///< what cudaGetDeviceCount reported
  int driver_version = 0;            ///< cudaDriverGetVersion: 1000 * major + 10 * minor; 0 when no driver is loaded
  int runtime_version = 0;           ///< the CUDA runtime this build uses, in the same form (13000 for 13.0)
  int device_nodes = 0;              ///< NVIDIA device nodes (/dev/nvidia0, /dev/nvidia1, ...) on this machine
  bool visible_devices_set = false;  ///< CUDA_VISIBLE_DEVICES is set (an empty device list is then deliberate)
};

/// CUDA runtime error codes the decision tells apart (cudaError_t values, checked against the
/// runtime's enum where CUDA is built).
namespace cuda_codes {
inline constexpr int success = 0;
inline constexpr int insufficient_driver = 35;      ///< cudaErrorInsufficientDriver: no driver, or too old
inline constexpr int devices_unavailable = 46;      ///< cudaErrorDevicesUnavailable: busy or prohibited
inline constexpr int no_device = 100;               ///< cudaErrorNoDevice
inline constexpr int system_driver_mismatch = 803;  ///< cudaErrorSystemDriverMismatch
inline constexpr int compat_not_supported = 804;    ///< cudaErrorCompatNotSupportedOnDevice
}  // namespace cuda_codes

/// The probe's answer for what it saw. Pure; not collective.
GpuProbe classify_gpu_probe(const GpuProbeFacts& facts);

/// The probe's answer when a device that the probe counted failed to start (cudaSetDevice, context
/// creation, first allocation): status device_unavailable, gpu_unusable, `error` in the reason.
GpuProbe unusable_device_probe(int device, const std::string& error);

/// How many NVIDIA device nodes `dev_directory`/nvidia0 .. nvidia63 exist (the driver makes one per
/// GPU; a container gets those of its GPUs). Not collective.
int count_nvidia_device_nodes(const std::string& dev_directory = "/dev");

/// Probes the CUDA runtime and the machine (classify_gpu_probe of the facts). Never throws for "no
/// GPU": no driver (cudaErrorInsufficientDriver) or no device gives device_count 0 with a reason.
/// Not collective.
GpuProbe probe_gpus() noexcept;

}  // namespace strider
