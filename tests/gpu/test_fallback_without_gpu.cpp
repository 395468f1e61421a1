// In a CUDA build on a machine where no GPU works (no driver, no device): make_backend("auto") must
// fall back to the CPU backend and say why (the probe's reason), and make_backend("cuda") must be a
// UsageError. Where a GPU works this checks nothing and exits 77 (skipped); the gpu tests cover it.
#include <iostream>
#include <string>

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
    std::cout << (failures == 0 ? "passed" : "failed") << ": no GPU (" << probe.reason
              << "): auto -> cpu, cuda -> UsageError" << std::endl;
    return failures == 0 ? 0 : 1;
  });
}
