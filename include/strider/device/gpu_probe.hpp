#pragma once
/// \file
/// Whether this process can use a GPU. No CUDA header: works in every build.

#include <string>

#include "strider/config.hpp"

namespace strider {

/// The result of probing for CUDA devices.
struct GpuProbe {
  int device_count = 0;  ///< usable CUDA devices (0 when none, no driver, or a CPU-only build)
  std::string reason;    ///< why there is none, in words ("built without CUDA", "no CUDA driver", ...)
};

/// Probes the CUDA runtime. Never throws for "no GPU": no driver (cudaErrorInsufficientDriver) or no
/// device gives device_count 0 with a reason. Not collective.
GpuProbe probe_gpus() noexcept;

}  // namespace strider
