// make_backend: which backend runs, and why.
#include "strider/train/backend.hpp"

#include "strider/config.hpp"
#include "strider/core/error.hpp"
#include "strider/device/gpu_probe.hpp"
#include "strider/train/cpu_backend.hpp"

namespace strider {

std::unique_ptr<Backend> make_backend(const std::string& choice, const Communicator& comm, std::string* why) {
  (void)comm;  // the CUDA backend will bind comm.local_rank() to a device and build NCCL from comm
  STRIDER_REQUIRE(choice == "auto" || choice == "cpu" || choice == "cuda",
                  "--backend must be auto, cpu or cuda, got '" + choice + "'");
  std::string reason;
  if (choice == "cpu") {
    reason = "cpu backend: requested with --backend cpu";
  } else {
    const GpuProbe probe = probe_gpus();
    if (choice == "cuda") {
      if (!STRIDER_HAS_CUDA) STRIDER_THROW(UsageError, "--backend cuda: " + probe.reason);
      if (probe.device_count == 0) STRIDER_THROW(UsageError, "--backend cuda: no usable GPU (" + probe.reason + ")");
    }
    // ---- CUDA backend hook (issue 8) ------------------------------------------------------------
    // When the CUDA backend exists (src/device/cuda/, declared in a private header), return it here:
    //   if (STRIDER_HAS_CUDA && probe.device_count > 0) {
    //     if (why) *why = "cuda backend: " + std::to_string(probe.device_count) + " device(s), ...";
    //     return make_cuda_backend(comm);
    //   }
    // Until then a CUDA build with a working device still has no CUDA backend to run.
    if (probe.device_count > 0) {
      if (choice == "cuda") {
        STRIDER_THROW(UsageError, "--backend cuda: this build has no CUDA training backend yet (issue 8); use "
                                  "--backend cpu or auto");
      }
      reason = "cpu backend: a GPU works, but this build has no CUDA training backend yet";
    } else {
      reason = "cpu backend: no usable GPU (" + probe.reason + ")";
    }
  }
  if (why != nullptr) *why = reason;
  return std::make_unique<CpuBackend>();
}

}  // namespace strider
