// make_backend: which backend runs, and why.
#include "strider/device/backend.hpp"

#include "strider/config.hpp"
#include "strider/core/error.hpp"
#include "strider/device/gpu_probe.hpp"
#if STRIDER_HAS_CUDA
#include "strider/device/cuda_backend.hpp"
#include "strider/device/gpu_binding.hpp"
#endif
#include "strider/device/cpu_backend.hpp"

namespace strider {

std::unique_ptr<Backend> make_backend(const std::string& choice, const Communicator& comm, std::string* why) {
  (void)comm;  // only the CUDA backend uses it: it binds comm.local_rank() to a device
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
#if STRIDER_HAS_CUDA
    if (probe.device_count > 0) {
      const CudaBackendFlags flags = cuda_backend_flags_from_environment();
      if (why != nullptr) {
        *why = "cuda backend: " + std::to_string(probe.device_count) + " visible device(s), node-local rank " +
               std::to_string(comm.local_rank()) + " binds device " +
               std::to_string(choose_device(comm.local_rank(), probe.device_count));
      }
      return make_cuda_backend(comm, flags.allow_shared_device);
    }
#endif
    reason = "cpu backend: no usable GPU (" + probe.reason + ")";
  }
  if (why != nullptr) *why = reason;
  return std::make_unique<CpuBackend>();
}

}  // namespace strider
