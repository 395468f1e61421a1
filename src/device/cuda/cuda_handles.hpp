#pragma once
// Move-only owners of CUDA and NCCL resources (private to the CUDA part). Releases never throw: a
// failing release is logged, and cudaErrorCudartUnloading at process exit is tolerated.

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>

#include "strider/core/unique_handle.hpp"

namespace strider::detail {

/// Logs a failed release unless CUDA is already unloading (process exit).
void log_release_failure(const char* what, cudaError_t code) noexcept;

struct CudaStreamTraits {
  using handle_type = cudaStream_t;
  static cudaStream_t null() noexcept { return nullptr; }
  static void release(cudaStream_t stream) noexcept {
    log_release_failure("cudaStreamDestroy", cudaStreamDestroy(stream));
  }
};
struct CudaEventTraits {
  using handle_type = cudaEvent_t;
  static cudaEvent_t null() noexcept { return nullptr; }
  static void release(cudaEvent_t event) noexcept { log_release_failure("cudaEventDestroy", cudaEventDestroy(event)); }
};
struct DeviceMemoryTraits {
  using handle_type = void*;
  static void* null() noexcept { return nullptr; }
  static void release(void* pointer) noexcept { log_release_failure("cudaFree", cudaFree(pointer)); }
};
struct PinnedMemoryTraits {
  using handle_type = void*;
  static void* null() noexcept { return nullptr; }
  static void release(void* pointer) noexcept { log_release_failure("cudaFreeHost", cudaFreeHost(pointer)); }
};
struct NcclCommTraits {
  using handle_type = ncclComm_t;
  static ncclComm_t null() noexcept { return nullptr; }
  static void release(ncclComm_t comm) noexcept;
};

using CudaStream = UniqueHandle<CudaStreamTraits>;
using CudaEvent = UniqueHandle<CudaEventTraits>;
using DeviceMemory = UniqueHandle<DeviceMemoryTraits>;
using PinnedMemory = UniqueHandle<PinnedMemoryTraits>;
using NcclComm = UniqueHandle<NcclCommTraits>;

/// A new non-blocking stream (checked).
CudaStream make_stream();
/// A new event; timing events record elapsed time, others are cheaper (checked).
CudaEvent make_event(bool timing);
/// cudaMalloc of `bytes` (checked; the hint names the size).
DeviceMemory allocate_device(std::size_t bytes);
/// cudaHostAlloc of `bytes`, portable pinned memory (checked).
PinnedMemory allocate_pinned(std::size_t bytes);

}  // namespace strider::detail
