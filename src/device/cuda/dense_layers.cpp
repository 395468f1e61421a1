// DenseLayers: the affine layers on cuBLAS or on the kernels. cuBLAS is column-major: a row-major
// matrix M[r, c] is the column-major M^T[c, r] with leading dimension c, so each row-major product
// below is the column-major product of the transposes (out^T = W^T * in^T, and so on).
#include "device/cuda/dense_layers.hpp"

#include <climits>
#include <string>

#include "device/cuda/cuda_kernels.cuh"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"

namespace strider::detail {
namespace {

// What cuBLAS asks for on Hopper (smaller devices use less of it).
constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

void check(cublasStatus_t status, const char* call, const char* file, int line, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(ErrorContext{call, relative_source_path(file), line, -1, static_cast<std::int64_t>(status),
                               what + ": " + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) +
                                   "); STRIDER_CUDA_DENSE=kernels runs the layers without cuBLAS"});
}
#define STRIDER_CUBLAS_CHECK(call, what) check((call), #call, __FILE__, __LINE__, what)

int dimension(std::int64_t value, const char* name) {
  if (value > INT_MAX)
    STRIDER_THROW(UsageError, std::string("a dense layer's ") + name + " is " + std::to_string(value) +
                                  ", more than cuBLAS's 32-bit sizes take; use smaller batches");
  return static_cast<int>(value);
}

}  // namespace

void CublasHandleTraits::release(cublasHandle_t handle) noexcept {
  const cublasStatus_t status = cublasDestroy(handle);
  if (status != CUBLAS_STATUS_SUCCESS) log_warn("cublasDestroy failed: ", cublasGetStatusString(status));
}

DenseLayers::DenseLayers(CudaDense kind, cudaStream_t stream) : kind_(kind), stream_(stream) {
  if (kind_ != CudaDense::cublas) return;
  cublasHandle_t handle = nullptr;
  STRIDER_CUBLAS_CHECK(cublasCreate(&handle), "creating a cuBLAS handle");
  handle_.reset(handle);
  STRIDER_CUBLAS_CHECK(cublasSetStream(handle, stream), "binding cuBLAS to the compute stream");
  // After cublasSetStream, which resets the workspace to cuBLAS's own pool.
  workspace_ = allocate_device(workspace_bytes);
  STRIDER_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace_.get(), workspace_bytes), "giving cuBLAS its workspace");
  STRIDER_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "asking cuBLAS for fp32 products");
}

std::int64_t DenseLayers::scratch_floats(std::int64_t n, std::int64_t rows, std::int64_t cols) const {
  return kind_ == CudaDense::cublas ? n : kernels::parameter_gradient_partials(n, rows, cols);
}

void DenseLayers::forward(const float* in, std::int64_t n, std::int64_t rows, const float* weights, const float* bias,
                          std::int64_t cols, bool relu, float* out) const {
  if (kind_ == CudaDense::kernels) {
    kernels::affine_forward(stream_, in, n, rows, weights, bias, cols, relu, out);
    return;
  }
  if (n == 0) return;
  const float one = 1.0f, zero = 0.0f;
  // out^T[cols, n] = W^T[cols, rows] * in^T[rows, n]
  STRIDER_CUBLAS_CHECK(
      cublasSgemm(handle_.get(), CUBLAS_OP_N, CUBLAS_OP_N, dimension(cols, "output count"), dimension(n, "batch"),
                  dimension(rows, "input count"), &one, weights, dimension(cols, "output count"), in,
                  dimension(rows, "input count"), &zero, out, dimension(cols, "output count")),
      "an affine layer's product");
  kernels::add_bias(stream_, out, n, bias, cols, relu);
}

void DenseLayers::parameter_gradients(const float* in, std::int64_t n, std::int64_t rows, const float* out_gradients,
                                      std::int64_t cols, float* weight_gradients, float* bias_gradients,
                                      float* scratch) const {
  if (kind_ == CudaDense::kernels) {
    kernels::affine_parameter_gradients(stream_, in, n, rows, out_gradients, cols, weight_gradients, bias_gradients,
                                        scratch);
    return;
  }
  if (n == 0) return;
  const float one = 1.0f;
  const int m = dimension(cols, "output count"), k = dimension(n, "batch"), r = dimension(rows, "input count");
  // dW^T[cols, rows] += g^T[cols, n] * in[n, rows]
  STRIDER_CUBLAS_CHECK(cublasSgemm(handle_.get(), CUBLAS_OP_N, CUBLAS_OP_T, m, r, k, &one, out_gradients, m, in, r,
                                   &one, weight_gradients, m),
                       "an affine layer's weight gradients");
  // db[cols] += g^T[cols, n] * ones[n]
  kernels::fill(stream_, scratch, n, 1.0f);
  STRIDER_CUBLAS_CHECK(
      cublasSgemv(handle_.get(), CUBLAS_OP_N, m, k, &one, out_gradients, m, scratch, 1, &one, bias_gradients, 1),
      "an affine layer's bias gradients");
}

void DenseLayers::input_gradients(const float* weights, std::int64_t n, std::int64_t rows, const float* out_gradients,
                                  std::int64_t cols, const float* mask, float* in_gradients) const {
  if (kind_ == CudaDense::kernels) {
    kernels::affine_input_gradients(stream_, weights, n, rows, out_gradients, cols, mask, in_gradients);
    return;
  }
  if (n == 0) return;
  const float one = 1.0f, zero = 0.0f;
  const int m = dimension(rows, "input count"), c = dimension(cols, "output count");
  // dx^T[rows, n] = W[rows, cols] * g^T[cols, n]; W is the column-major W^T[cols, rows], transposed
  STRIDER_CUBLAS_CHECK(cublasSgemm(handle_.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, dimension(n, "batch"), c, &one, weights,
                                   c, out_gradients, c, &zero, in_gradients, m),
                       "an affine layer's input gradients");
  if (mask != nullptr) kernels::mask_relu_gradients(stream_, mask, n * rows, in_gradients);
}

}  // namespace strider::detail
