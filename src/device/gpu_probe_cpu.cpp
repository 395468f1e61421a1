// probe_gpus() for builds without the CUDA part (the CUDA build defines it in src/device/cuda/).
#include "strider/device/gpu_probe.hpp"

#if !STRIDER_HAS_CUDA
namespace strider {
GpuProbe probe_gpus() noexcept {
  return GpuProbe{0, "strider was built without CUDA (STRIDER_ENABLE_CUDA=OFF or no nvcc/NCCL)"};
}
}  // namespace strider
#endif
