// DenseLayers: the affine layers on cuBLAS or on the kernels. cuBLAS is column-major: a row-major
// matrix M[r, c] is the column-major M^T[c, r] with leading dimension c, so each row-major product
// below is the column-major product of the transposes (out^T = W^T * in^T, and so on).
//
// cuBLAS is opened with dlopen when the first cuBLAS layers start, not linked: loading it (with
// cuBLASLt) costs every process about 200 MB of memory and 0.1 s, which a CPU run, an app that only
// plans, or the kernels' path should not pay.
#include "device/cuda/dense_layers.hpp"

#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <string>
#include <type_traits>

#include "device/cuda/cuda_kernels.cuh"
#include "strider/core/error.hpp"
#include "strider/core/log.hpp"

#define STRIDER_STRINGIFY_(x) #x
#define STRIDER_STRINGIFY(x) STRIDER_STRINGIFY_(x)

namespace strider::detail {
namespace {

// What cuBLAS asks for on Hopper (smaller devices use less of it).
constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

// The cuBLAS of the toolkit the build used (its major version: the same ABI).
constexpr const char* cublas_library = "libcublas.so." STRIDER_STRINGIFY(CUBLAS_VER_MAJOR);

/// The cuBLAS functions DenseLayers calls, from the library opened at run time.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemv_v2) sgemv = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Opens cuBLAS once (the loader's search: LD_LIBRARY_PATH, this library's RUNPATH, the system's
// cache, then the build's toolkit folder) and resolves the functions; the library stays loaded.
// Throws CudaError naming the library and what helps.
const CublasApi& cublas() {
  static CublasApi api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = dlopen(cublas_library, RTLD_NOW | RTLD_LOCAL);
#ifdef STRIDER_CUDA_LIBRARY_DIR
    if (library == nullptr)
      library = dlopen((std::string(STRIDER_CUDA_LIBRARY_DIR) + "/" + cublas_library).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (library == nullptr) {
      failure = std::string("cannot open ") + cublas_library + " (" + dlerror() +
                "): put the CUDA toolkit's library folder on LD_LIBRARY_PATH, or set STRIDER_CUDA_DENSE=kernels";
      return;
    }
    const auto resolve = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
      if (function == nullptr && failure.empty())
        failure = std::string(cublas_library) + " lacks " + name + ": it is not the cuBLAS this build expects";
    };
    resolve(api.create, "cublasCreate_v2");
    resolve(api.destroy, "cublasDestroy_v2");
    resolve(api.set_stream, "cublasSetStream_v2");
    resolve(api.set_workspace, "cublasSetWorkspace_v2");
    resolve(api.set_math_mode, "cublasSetMathMode");
    resolve(api.sgemm, "cublasSgemm_v2");
    resolve(api.sgemv, "cublasSgemv_v2");
    resolve(api.status_name, "cublasGetStatusName");
    resolve(api.status_string, "cublasGetStatusString");
  });
  if (!failure.empty()) STRIDER_THROW(CudaError, failure);
  return api;
}

void check(cublasStatus_t status, const char* call, const char* file, int line, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const CublasApi& api = cublas();
  throw CudaError(ErrorContext{call, relative_source_path(file), line, -1, static_cast<std::int64_t>(status),
                               what + ": " + api.status_name(status) + " (" + api.status_string(status) +
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
  const CublasApi& api = cublas();  // opened: a handle exists
  const cublasStatus_t status = api.destroy(handle);
  if (status != CUBLAS_STATUS_SUCCESS) log_warn("cublasDestroy failed: ", api.status_string(status));
}

DenseLayers::DenseLayers(CudaDense kind, cudaStream_t stream) : kind_(kind), stream_(stream) {
  if (kind_ != CudaDense::cublas) return;
  const CublasApi& api = cublas();
  cublasHandle_t handle = nullptr;
  STRIDER_CUBLAS_CHECK(api.create(&handle), "creating a cuBLAS handle");
  handle_.reset(handle);
  STRIDER_CUBLAS_CHECK(api.set_stream(handle, stream), "binding cuBLAS to the compute stream");
  // After cublasSetStream, which resets the workspace to cuBLAS's own pool.
  workspace_ = allocate_device(workspace_bytes);
  STRIDER_CUBLAS_CHECK(api.set_workspace(handle, workspace_.get(), workspace_bytes), "giving cuBLAS its workspace");
  STRIDER_CUBLAS_CHECK(api.set_math_mode(handle, CUBLAS_DEFAULT_MATH), "asking cuBLAS for fp32 products");
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
  const int c = dimension(cols, "output count"), r = dimension(rows, "input count");
  // out^T[cols, n] = W^T[cols, rows] * in^T[rows, n]
  STRIDER_CUBLAS_CHECK(cublas().sgemm(handle_.get(), CUBLAS_OP_N, CUBLAS_OP_N, c, dimension(n, "batch"), r, &one,
                                      weights, c, in, r, &zero, out, c),
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
  STRIDER_CUBLAS_CHECK(cublas().sgemm(handle_.get(), CUBLAS_OP_N, CUBLAS_OP_T, m, r, k, &one, out_gradients, m, in, r,
                                      &one, weight_gradients, m),
                       "an affine layer's weight gradients");
  // db[cols] += g^T[cols, n] * ones[n]
  kernels::fill(stream_, scratch, n, 1.0f);
  STRIDER_CUBLAS_CHECK(
      cublas().sgemv(handle_.get(), CUBLAS_OP_N, m, k, &one, out_gradients, m, scratch, 1, &one, bias_gradients, 1),
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
  STRIDER_CUBLAS_CHECK(cublas().sgemm(handle_.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, dimension(n, "batch"), c, &one,
                                      weights, c, out_gradients, c, &zero, in_gradients, m),
                       "an affine layer's input gradients");
  if (mask != nullptr) kernels::mask_relu_gradients(stream_, mask, n * rows, in_gradients);
}

}  // namespace strider::detail
