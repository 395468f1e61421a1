// strider_gpu_probe: prints "N" (the usable CUDA devices) and exits 0, or prints why there is none and
// exits STRIDER_GPU_SKIP_CODE (77), for the GPU tests written as scripts.
#include <iostream>

#include "strider/device/gpu_probe.hpp"

int main() {
  const strider::GpuProbe probe = strider::probe_gpus();
  if (probe.device_count == 0) {
    std::cout << "no CUDA device (" << probe.reason << ")" << std::endl;
    return STRIDER_GPU_SKIP_CODE;
  }
  std::cout << probe.device_count << std::endl;
  return 0;
}
