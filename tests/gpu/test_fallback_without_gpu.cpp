// In a CUDA build on a machine where no GPU works (no driver, no device): make_backend("auto") must
// fall back to the CPU backend and say why (the probe's reason), and make_backend("cuda") must be a
// UsageError. The dense layers' cuBLAS is opened (dlopen) and its functions resolved: without a GPU
// creating a handle fails with cuBLAS's own status name, which only a resolved cuBLAS can give.
// Where a GPU works this checks nothing and exits 77 (skipped); the gpu tests cover it.
#include <iostream>
#include <string>

#include "device/cuda/dense_layers.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/error.hpp"
#include "strider/device/backend.hpp"
#include "strider/device/gpu_probe.hpp"

int main(int argc, char** argv) {
  return strider::run_mpi_app(argc, argv, [](strider::Communicator& world) {
    const strider::GpuProbe probe = strider::probe_gpus();
    if (probe.device_count > 0) {
      std::cout << "skipped: a CUDA device works here; this test checks the fallback without one" << std::endl;
      return STRIDER_GPU_SKIP_CODE;
    }
    int failures = 0;
    auto expect = [&](bool condition, const std::string& what) {
      if (!condition) {
        std::cout << "FAILED: " << what << std::endl;
        ++failures;
      }
    };
    std::string why;
    const auto chosen = strider::make_backend("auto", world, &why);
    expect(chosen->name() == "cpu", "auto without a GPU picks the cpu backend, got " + chosen->name());
    expect(why == "cpu backend: no usable GPU (" + probe.reason + ")", "auto says why: '" + why + "'");
    try {
      strider::make_backend("cuda", world, nullptr);
      expect(false, "cuda without a GPU must throw UsageError");
    } catch (const strider::UsageError& error) {
      expect(error.reason().find(probe.reason) != std::string::npos,
             "the UsageError names the reason: " + error.reason());
    }
    // STRIDER_CUDA_DENSE=kernels never touches cuBLAS; cublas opens it, then cannot make a handle.
    strider::detail::DenseLayers kernels(strider::CudaDense::kernels, nullptr);
    expect(kernels.scratch_floats(3000, 4, 3) > 0, "the kernels' layers split a narrow layer's 3000 rows into chunks");
    try {
      strider::detail::DenseLayers cublas(strider::CudaDense::cublas, nullptr);
      expect(false, "a cuBLAS handle without a GPU must throw CudaError");
    } catch (const strider::CudaError& error) {
      expect(error.reason().find("creating a cuBLAS handle: CUBLAS_STATUS_") != std::string::npos &&
                 error.reason().find("STRIDER_CUDA_DENSE=kernels") != std::string::npos,
             "cuBLAS opened and its status named: " + error.reason());
    }
    std::cout << (failures == 0 ? "passed" : "failed") << ": no GPU (" << probe.reason
              << "): auto -> cpu, cuda -> UsageError, cuBLAS opened" << std::endl;
    return failures == 0 ? 0 : 1;
  });
}
