#pragma once
// The CUDA models' dense (affine) layers, on cuBLAS or on strider's own kernels (private to the
// CUDA part). Row-major matrices, one sample per row, as in cuda_kernels.cuh:
//   forward:             out[n, cols] = in[n, rows] * W[rows, cols] + b[cols]  (ReLU when asked)
//   parameter_gradients: dW += in^T * g; db += column sums of g[n, cols]
//   input_gradients:     dx[n, rows] = g[n, cols] * W^T  (zero where the ReLU was off)
// cuBLAS (the default) runs full fp32 SGEMM (no TF32) on the stream it is bound to, with a workspace
// allocated once here, so that no later call allocates device memory. Its products do not
// skip zero inputs as the kernels do (0 * inf is NaN there), and they sum in another order: results
// agree with the kernels and the CPU within float rounding for finite inputs. Both are deterministic
// on one device and toolkit.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "device/cuda/cuda_handles.hpp"
#include "strider/device/gpu_binding.hpp"

namespace strider::detail {

struct CublasHandleTraits {
  using handle_type = cublasHandle_t;
  static cublasHandle_t null() noexcept { return nullptr; }
  static void release(cublasHandle_t handle) noexcept;
};
using CublasHandle = UniqueHandle<CublasHandleTraits>;

class DenseLayers {
 public:
  /// For cuBLAS: a handle on the current device, bound to `stream`, with its workspace (throws
  /// CudaError naming cuBLAS's status when it cannot start). Every call below enqueues on `stream`.
  DenseLayers(CudaDense kind, cudaStream_t stream);

  CudaDense kind() const noexcept { return kind_; }

  /// Floats of scratch parameter_gradients needs for a layer of `rows` inputs and `cols` outputs
  /// over `n` rows (the kernels' chunk sums, cuBLAS's vector of ones). Reserve it before enqueueing.
  std::int64_t scratch_floats(std::int64_t n, std::int64_t rows, std::int64_t cols) const;

  void forward(const float* in, std::int64_t n, std::int64_t rows, const float* weights, const float* bias,
               std::int64_t cols, bool relu, float* out) const;
  /// `scratch` holds scratch_floats(n, rows, cols) floats (may be null when that is 0).
  void parameter_gradients(const float* in, std::int64_t n, std::int64_t rows, const float* out_gradients,
                           std::int64_t cols, float* weight_gradients, float* bias_gradients, float* scratch) const;
  /// `mask` (the ReLU output) may be null: no mask.
  void input_gradients(const float* weights, std::int64_t n, std::int64_t rows, const float* out_gradients,
                       std::int64_t cols, const float* mask, float* in_gradients) const;

 private:
  CudaDense kind_;
  cudaStream_t stream_;
  DeviceMemory workspace_;  // released after the handle that uses it
  CublasHandle handle_;
};

}  // namespace strider::detail
