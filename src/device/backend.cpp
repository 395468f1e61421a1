// make_backend: which backend runs, and why.
#include "strider/device/backend.hpp"

#include "device/device_choice.hpp"
#include "strider/config.hpp"
#include "strider/device/cpu_backend.hpp"
#if STRIDER_HAS_CUDA
#include "strider/device/cuda_backend.hpp"
#include "strider/device/gpu_binding.hpp"
#endif

namespace strider {

std::unique_ptr<Backend> make_backend(const std::string& choice, const Communicator& comm, std::string* why) {
  const detail::DeviceChoice chosen = detail::choose_device_kind(choice, comm, "backend", "--backend");
  if (why != nullptr) *why = chosen.why;
#if STRIDER_HAS_CUDA
  if (chosen.cuda) return make_cuda_backend(comm, cuda_backend_flags_from_environment().allow_shared_device);
#endif
  return std::make_unique<CpuBackend>();
}

}  // namespace strider
