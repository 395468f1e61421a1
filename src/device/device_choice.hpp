#pragma once
// Which device a factory takes for a choice of auto | cpu | cuda (make_backend, make_device_batches):
// one decision, so that both say the same things in the same words. The decision itself is pure
// over a GPU probe, so that each case (a usable GPU, none, one that exists but cannot be used) is
// unit-tested in every build.

#include <string>

#include "strider/comm/communicator.hpp"
#include "strider/device/gpu_probe.hpp"

namespace strider::detail {

/// The outcome of choose_device_kind.
struct DeviceChoice {
  bool cuda = false;    ///< true: this rank's GPU; false: the CPU
  int device = -1;      ///< with cuda: the device ordinal this rank binds (choose_device)
  std::string why;      ///< which and why, in words ("cuda backend: 2 visible device(s), ...")
  std::string warning;  ///< non-empty when a GPU exists but cannot be used: the caller logs it on every rank
};

/// cpu: the CPU. auto: this rank's GPU when a device works (probe.status usable), else the CPU, with
/// a warning when probe.gpu_unusable (a GPU is here but cannot be used). cuda: the GPU, or
/// UsageError ("<option> cuda: no usable GPU (reason)"; "<option> cuda: <reason>" in a build without
/// CUDA). Any other choice: UsageError ("<option> must be auto, cpu or cuda, got '<choice>'").
/// `subject` names what is chosen in `why` ("backend": "cpu backend: requested with --backend cpu").
/// Pure; not collective.
DeviceChoice choose_device_kind(const std::string& choice, const GpuProbe& probe, int local_rank,
                                const std::string& subject, const std::string& option);

/// choose_device_kind for probe_gpus() and comm.local_rank(). Not collective.
DeviceChoice choose_device_kind(const std::string& choice, const Communicator& comm, const std::string& subject,
                                const std::string& option);

}  // namespace strider::detail
