#include <stdexcept>
#include <string>

#include "trainer_kernels.hpp"

namespace strider::gpu_testing {
namespace {

void check(cudaError_t code, const char* what) {
  if (code != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(code));
}

// Nanoseconds of the GPU's global timer.
__device__ unsigned long long global_time_ns() {
  unsigned long long time;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(time));
  return time;
}

__global__ void wait_then_sum_kernel(const volatile int* go, unsigned long long timeout_ns, const float* data,
                                     std::int64_t count, double* sum, int* saw_go) {
  const unsigned long long start = global_time_ns();
  while (*go == 0 && global_time_ns() - start < timeout_ns) {
  }
  *saw_go = *go;
  double total = 0.0;
  for (std::int64_t i = 0; i < count; ++i) total += data[i];
  *sum = total;
}

}  // namespace

HostFlag::HostFlag() {
  void* memory = nullptr;
  check(cudaHostAlloc(&memory, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc of a flag");
  host_ = static_cast<volatile int*>(memory);
  *host_ = 0;
  void* device = nullptr;
  check(cudaHostGetDevicePointer(&device, memory, 0), "cudaHostGetDevicePointer of a flag");
  device_ = static_cast<const volatile int*>(device);
}

HostFlag::~HostFlag() {
  cudaFreeHost(const_cast<int*>(host_));
}

void HostFlag::set() noexcept {
  *host_ = 1;
}

void wait_then_sum(cudaStream_t stream, const HostFlag& go, double timeout_s, const float* data, std::int64_t count,
                   double* sum, int* saw_go) {
  const auto timeout_ns = static_cast<unsigned long long>(timeout_s * 1e9);
  wait_then_sum_kernel<<<1, 1, 0, stream>>>(go.device_pointer(), timeout_ns, data, count, sum, saw_go);
  check(cudaGetLastError(), "launching wait_then_sum");
}

}  // namespace strider::gpu_testing
