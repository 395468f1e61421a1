// make_backend: which backend runs, and why.
#include "strider/device/backend.hpp"

#include "device/device_choice.hpp"
#include "strider/config.hpp"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"
#include "strider/device/cpu_backend.hpp"
#include "strider/device/gpu_probe.hpp"
#if STRIDER_HAS_CUDA
#include "strider/device/cuda_backend.hpp"
#include "strider/device/gpu_binding.hpp"
#endif

namespace strider {

std::unique_ptr<Backend> make_backend(const std::string& choice, const Communicator& comm, std::string* why) {
  detail::DeviceChoice chosen = detail::choose_device_kind(choice, comm, "backend", "--backend");
#if STRIDER_HAS_CUDA
  if (chosen.cuda) {
    try {
      auto backend = make_cuda_backend(comm, cuda_backend_flags_from_environment().allow_shared_device);
      if (why != nullptr) *why = chosen.why;
      return backend;
    } catch (const CudaError& error) {
      // The device was counted but does not start (busy in exclusive mode, out of memory, ...).
      if (choice == "cuda") throw;
      chosen = detail::choose_device_kind(choice, unusable_device_probe(chosen.device, error.reason()),
                                          comm.local_rank(), "backend", "--backend");
    }
  }
#endif
  if (!chosen.warning.empty()) log_warn(chosen.warning);
  if (why != nullptr) *why = chosen.why;
  return std::make_unique<CpuBackend>();
}

}  // namespace strider
