#pragma once
// A stand-in for a trainer's own CUDA code (tests only): a kernel that reads a device batch after
// waiting for the host's go-ahead, so that tests control when a trainer's step reads its slot.

#include <cuda_runtime.h>

#include <cstdint>

namespace strider::gpu_testing {

/// A flag in mapped pinned host memory that the host sets and a kernel polls. Move-only.
class HostFlag {
 public:
  HostFlag();
  ~HostFlag();
  HostFlag(const HostFlag&) = delete;
  HostFlag& operator=(const HostFlag&) = delete;
  void set() noexcept;
  const volatile int* device_pointer() const noexcept { return device_; }

 private:
  volatile int* host_ = nullptr;
  const volatile int* device_ = nullptr;
};

/// One thread on `stream`: waits until `go` is set (at most `timeout_s` seconds of the GPU's timer),
/// then writes whether it saw the flag to *saw_go and the sum of data[0..count) to *sum (device
/// memory). Throws std::runtime_error when the launch fails.
void wait_then_sum(cudaStream_t stream, const HostFlag& go, double timeout_s, const float* data, std::int64_t count,
                   double* sum, int* saw_go);

}  // namespace strider::gpu_testing
