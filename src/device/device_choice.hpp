#pragma once
// Which device a factory takes for a choice of auto | cpu | cuda (make_backend, make_device_batches):
// one decision, so that both say the same things in the same words.

#include <string>

#include "strider/comm/communicator.hpp"

namespace strider::detail {

/// The outcome of choose_device_kind.
struct DeviceChoice {
  bool cuda = false;  ///< true: this rank's GPU; false: the CPU
  int device = -1;    ///< with cuda: the device ordinal this rank binds (choose_device)
  std::string why;    ///< which and why, in words ("cuda backend: 2 visible device(s), ...")
};

/// cpu: the CPU. auto: this rank's GPU when this build has CUDA and a device works, else the CPU.
/// cuda: the GPU, or UsageError ("<option> cuda: no usable GPU (reason)"). Any other choice:
/// UsageError ("<option> must be auto, cpu or cuda, got '<choice>'"). `subject` names what is
/// chosen in `why` ("backend": "cpu backend: requested with --backend cpu"). Not collective.
DeviceChoice choose_device_kind(const std::string& choice, const Communicator& comm, const std::string& subject,
                                const std::string& option);

}  // namespace strider::detail
