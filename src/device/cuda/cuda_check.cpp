#include "device/cuda/cuda_check.hpp"

#include <cstdlib>

#include "device/cuda/cuda_handles.hpp"
#include "strider/core/log.hpp"
#include "strider/device/gpu_probe.hpp"

namespace strider {
namespace detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line, const std::string& hint) {
  std::string full_hint = hint;
  full_hint +=
      (full_hint.empty() ? "" : ": ") + std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ")";
  throw CudaError(ErrorContext{call, file, line, -1, static_cast<std::int64_t>(code), full_hint});
}

void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line, const std::string& hint) {
  std::string full_hint = hint;
  full_hint += (full_hint.empty() ? "" : ": ") + std::string(ncclGetErrorString(code));
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') full_hint += std::string(" (") + last + ")";
  throw NcclError(ErrorContext{call, file, line, -1, static_cast<std::int64_t>(code), full_hint});
}

void log_release_failure(const char* what, cudaError_t code) noexcept {
  if (code == cudaSuccess || code == cudaErrorCudartUnloading) return;
  log_warn(what, " failed while releasing a resource: ", cudaGetErrorName(code));
}

void NcclCommTraits::release(ncclComm_t comm) noexcept {
  const ncclResult_t code = ncclCommDestroy(comm);
  if (code != ncclSuccess) log_warn("ncclCommDestroy failed: ", ncclGetErrorString(code));
}

CudaStream make_stream() {
  cudaStream_t stream = nullptr;
  STRIDER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
  return CudaStream(stream);
}

CudaEvent make_event(bool timing) {
  cudaEvent_t event = nullptr;
  STRIDER_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming),
                     "creating an event");
  return CudaEvent(event);
}

DeviceMemory allocate_device(std::size_t bytes) {
  void* pointer = nullptr;
  STRIDER_CUDA_CHECK(cudaMalloc(&pointer, bytes), "allocating " + std::to_string(bytes) + " bytes on the device");
  return DeviceMemory(pointer);
}

PinnedMemory allocate_pinned(std::size_t bytes) {
  void* pointer = nullptr;
  STRIDER_CUDA_CHECK(cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable),
                     "pinning " + std::to_string(bytes) + " bytes of host memory");
  return PinnedMemory(pointer);
}

}  // namespace detail

static_assert(cudaSuccess == cuda_codes::success);
static_assert(cudaErrorInsufficientDriver == cuda_codes::insufficient_driver);
static_assert(cudaErrorDevicesUnavailable == cuda_codes::devices_unavailable);
static_assert(cudaErrorNoDevice == cuda_codes::no_device);
static_assert(cudaErrorSystemDriverMismatch == cuda_codes::system_driver_mismatch);
static_assert(cudaErrorCompatNotSupportedOnDevice == cuda_codes::compat_not_supported);

std::string gpu_build_versions() {
  return "CUDA " + std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
         ", NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
}

GpuProbe probe_gpus() noexcept {
  try {
    GpuProbeFacts facts;
    facts.built_with_cuda = true;
    int count = 0;
    const cudaError_t code = cudaGetDeviceCount(&count);
    facts.count_result = static_cast<int>(code);
    facts.count_result_name = cudaGetErrorName(code);
    facts.device_count = code == cudaSuccess ? count : 0;
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;  // 0 also means "no driver loaded"
    facts.driver_version = driver;
    facts.runtime_version = CUDART_VERSION;
    facts.device_nodes = count_nvidia_device_nodes();
    facts.visible_devices_set = std::getenv("CUDA_VISIBLE_DEVICES") != nullptr;
    (void)cudaGetLastError();  // a failed probe must not linger as the runtime's last error
    return classify_gpu_probe(facts);
  } catch (...) {
    GpuProbe probe;
    probe.status = GpuStatus::cuda_error;
    probe.reason = "probing the CUDA runtime failed";
    return probe;
  }
}

}  // namespace strider
