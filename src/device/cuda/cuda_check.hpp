#pragma once
// Checked CUDA and NCCL calls (private to the CUDA part; public headers never include CUDA).
//   STRIDER_CUDA_CHECK(cudaMemcpyAsync(...), "copying batch 12 to the device");
//   STRIDER_NCCL_CHECK(ncclAllReduce(...), "all-reducing 1.2 MB of gradients");
// Each throws CudaError / NcclError with the call text, file:line, rank, native code and message.

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "strider/core/error.hpp"

namespace strider::detail {
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line,
                                   const std::string& hint);
[[noreturn]] void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line,
                                   const std::string& hint);
}  // namespace strider::detail

#define STRIDER_CUDA_CHECK(call, hint)                                                                        \
  do {                                                                                                        \
    const cudaError_t strider_cuda_code_ = (call);                                                            \
    if (strider_cuda_code_ != cudaSuccess)                                                                    \
      ::strider::detail::throw_cuda_error(strider_cuda_code_, #call,                                          \
                                          ::strider::detail::relative_source_path(__FILE__), __LINE__, hint); \
  } while (0)

#define STRIDER_NCCL_CHECK(call, hint)                                                                        \
  do {                                                                                                        \
    const ncclResult_t strider_nccl_code_ = (call);                                                           \
    if (strider_nccl_code_ != ncclSuccess && strider_nccl_code_ != ncclInProgress)                            \
      ::strider::detail::throw_nccl_error(strider_nccl_code_, #call,                                          \
                                          ::strider::detail::relative_source_path(__FILE__), __LINE__, hint); \
  } while (0)
