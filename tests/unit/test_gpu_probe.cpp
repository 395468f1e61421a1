// The GPU probe's decision with the CUDA runtime's answers stood in (every build, no GPU needed): no
// driver, a driver too old for this build, no device, devices busy, a CPU-only build on a GPU node;
// which of them mean "a GPU is here but cannot be used"; and make_backend's choice for each, which
// warns (auto) or refuses (cuda) exactly then.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "device/device_choice.hpp"
#include "strider/core/error.hpp"
#include "strider/device/gpu_probe.hpp"

using namespace strider;

namespace {
/// The backend's decision for `choice` and `probe`, for node-local rank 0.
strider::detail::DeviceChoice choose_backend(const std::string& choice, const GpuProbe& probe) {
  return strider::detail::choose_device_kind(choice, probe, 0, "backend", "--backend");
}
}  // namespace

namespace {

GpuProbeFacts cuda_facts(int result, const std::string& name, int driver_version, int nodes) {
  GpuProbeFacts facts;
  facts.built_with_cuda = true;
  facts.count_result = result;
  facts.count_result_name = name;
  facts.driver_version = driver_version;
  facts.runtime_version = 13000;
  facts.device_nodes = nodes;
  return facts;
}

}  // namespace

TEST_CASE("gpu probe: a working device is usable and needs no reason", "[gpu-probe]") {
  GpuProbeFacts facts = cuda_facts(0, "cudaSuccess", 13000, 2);
  facts.device_count = 2;
  const GpuProbe probe = classify_gpu_probe(facts);
  REQUIRE(probe.status == GpuStatus::usable);
  REQUIRE(probe.device_count == 2);
  REQUIRE(probe.reason.empty());
  REQUIRE_FALSE(probe.gpu_unusable);
}

TEST_CASE("gpu probe: no driver, and no sign of a GPU, is plain 'no GPU'", "[gpu-probe]") {
  const GpuProbe probe = classify_gpu_probe(cuda_facts(35, "cudaErrorInsufficientDriver", 0, 0));
  REQUIRE(probe.status == GpuStatus::no_driver);
  REQUIRE(probe.device_count == 0);
  REQUIRE(probe.reason == "no CUDA driver on this machine");
  REQUIRE_FALSE(probe.gpu_unusable);
}

TEST_CASE("gpu probe: device nodes without a loadable driver are a GPU that cannot be used", "[gpu-probe]") {
  const GpuProbe probe = classify_gpu_probe(cuda_facts(35, "cudaErrorInsufficientDriver", 0, 1));
  REQUIRE(probe.status == GpuStatus::no_driver);
  REQUIRE(probe.gpu_unusable);
  REQUIRE_THAT(probe.reason, Catch::Contains("1 NVIDIA device node (/dev/nvidia0)") && Catch::Contains("libcuda"));
}

TEST_CASE("gpu probe: a driver older than the build is told apart from no driver", "[gpu-probe]") {
  // The same runtime error (35) as without a driver; the driver version (12.4) tells them apart.
  const GpuProbe probe = classify_gpu_probe(cuda_facts(35, "cudaErrorInsufficientDriver", 12040, 8));
  REQUIRE(probe.status == GpuStatus::driver_too_old);
  REQUIRE(probe.device_count == 0);
  REQUIRE(probe.gpu_unusable);
  REQUIRE_THAT(probe.reason, Catch::Contains("supports CUDA 12.4") && Catch::Contains("CUDA 13.0") &&
                                 Catch::Contains("R580") && Catch::Contains("cudaErrorInsufficientDriver"));
  // A forward-compatibility mismatch is a driver problem too, nodes or not.
  const GpuProbe mismatch = classify_gpu_probe(cuda_facts(803, "cudaErrorSystemDriverMismatch", 12020, 0));
  REQUIRE(mismatch.status == GpuStatus::driver_too_old);
  REQUIRE(mismatch.gpu_unusable);
  REQUIRE_THAT(mismatch.reason, Catch::Contains("supports CUDA 12.2"));
}

TEST_CASE("gpu probe: no device, deliberately hidden or not", "[gpu-probe]") {
  SECTION("no device and no device node") {
    const GpuProbe probe = classify_gpu_probe(cuda_facts(100, "cudaErrorNoDevice", 13000, 0));
    REQUIRE(probe.status == GpuStatus::no_device);
    REQUIRE(probe.reason == "no CUDA device visible");
    REQUIRE_FALSE(probe.gpu_unusable);
  }
  SECTION("device nodes, but the driver shows none") {
    const GpuProbe probe = classify_gpu_probe(cuda_facts(100, "cudaErrorNoDevice", 13000, 4));
    REQUIRE(probe.status == GpuStatus::no_device);
    REQUIRE(probe.gpu_unusable);
    REQUIRE_THAT(probe.reason, Catch::Contains("4 NVIDIA device nodes (/dev/nvidia0...)"));
  }
  SECTION("hidden with CUDA_VISIBLE_DEVICES: on purpose, no warning") {
    GpuProbeFacts facts = cuda_facts(100, "cudaErrorNoDevice", 13000, 4);
    facts.visible_devices_set = true;
    const GpuProbe probe = classify_gpu_probe(facts);
    REQUIRE(probe.status == GpuStatus::no_device);
    REQUIRE_FALSE(probe.gpu_unusable);
    REQUIRE_THAT(probe.reason, Catch::Contains("CUDA_VISIBLE_DEVICES"));
  }
  SECTION("success with a count of zero is the same as no device") {
    const GpuProbe probe = classify_gpu_probe(cuda_facts(0, "cudaSuccess", 13000, 0));
    REQUIRE(probe.status == GpuStatus::no_device);
    REQUIRE(probe.device_count == 0);
  }
}

TEST_CASE("gpu probe: busy devices and other CUDA errors", "[gpu-probe]") {
  const GpuProbe busy = classify_gpu_probe(cuda_facts(46, "cudaErrorDevicesUnavailable", 13000, 1));
  REQUIRE(busy.status == GpuStatus::device_unavailable);
  REQUIRE(busy.gpu_unusable);
  REQUIRE_THAT(busy.reason, Catch::Contains("busy or unavailable"));
  const GpuProbe broken = classify_gpu_probe(cuda_facts(999, "cudaErrorUnknown", 13000, 0));
  REQUIRE(broken.status == GpuStatus::cuda_error);
  REQUIRE(broken.gpu_unusable);  // a driver is loaded
  REQUIRE(broken.reason == "CUDA unavailable: cudaErrorUnknown");
  const GpuProbe nothing = classify_gpu_probe(cuda_facts(999, "cudaErrorUnknown", 0, 0));
  REQUIRE_FALSE(nothing.gpu_unusable);
  const GpuProbe failed = unusable_device_probe(1, "cudaErrorMemoryAllocation (out of memory)");
  REQUIRE(failed.status == GpuStatus::device_unavailable);
  REQUIRE(failed.gpu_unusable);
  REQUIRE(failed.reason == "device 1 cannot be used: cudaErrorMemoryAllocation (out of memory)");
}

TEST_CASE("gpu probe: a build without CUDA on a GPU node says so", "[gpu-probe]") {
  GpuProbeFacts facts;
  facts.built_with_cuda = false;
  const GpuProbe plain = classify_gpu_probe(facts);
  REQUIRE(plain.status == GpuStatus::not_built);
  REQUIRE_THAT(plain.reason, Catch::Contains("built without CUDA"));
  REQUIRE_FALSE(plain.gpu_unusable);
  facts.device_nodes = 2;
  const GpuProbe on_gpu_node = classify_gpu_probe(facts);
  REQUIRE(on_gpu_node.gpu_unusable);
  REQUIRE_THAT(on_gpu_node.reason, Catch::Contains("2 NVIDIA device nodes") && Catch::Contains("built without CUDA"));
}

TEST_CASE("gpu probe: device nodes are counted by name, control nodes excluded", "[gpu-probe]") {
  char pattern[] = "/tmp/strider-dev-XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  const std::string directory = pattern;
  REQUIRE(count_nvidia_device_nodes(directory) == 0);
  for (const char* name : {"nvidia0", "nvidia1", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-modeset"})
    std::ofstream(directory + "/" + name).put('x');
  REQUIRE(count_nvidia_device_nodes(directory) == 3);
  for (const char* name : {"nvidia0", "nvidia1", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-modeset"})
    std::remove((directory + "/" + name).c_str());
  rmdir(directory.c_str());
}

TEST_CASE("backend choice: auto warns exactly when a GPU is here but unusable; cuda refuses", "[gpu-probe]") {
  GpuProbeFacts working = cuda_facts(0, "cudaSuccess", 13000, 1);
  working.device_count = 1;
  const GpuProbe usable = classify_gpu_probe(working);
  const GpuProbe none = classify_gpu_probe(cuda_facts(35, "cudaErrorInsufficientDriver", 0, 0));
  const GpuProbe too_old = classify_gpu_probe(cuda_facts(35, "cudaErrorInsufficientDriver", 12040, 1));
  GpuProbeFacts cpu_build;
  const GpuProbe not_built = classify_gpu_probe(cpu_build);

  const auto cpu = choose_backend("cpu", too_old);
  REQUIRE_FALSE(cpu.cuda);
  REQUIRE(cpu.why == "cpu backend: requested with --backend cpu");
  REQUIRE(cpu.warning.empty());

  REQUIRE(choose_backend("auto", usable).cuda);
  REQUIRE(choose_backend("cuda", usable).cuda);
  REQUIRE(choose_backend("auto", usable).device == 0);
  REQUIRE(choose_backend("auto", usable).why == "cuda backend: 1 visible device(s), node-local rank 0 binds device 0");
  REQUIRE(choose_backend("auto", usable).warning.empty());

  const auto quiet = choose_backend("auto", none);
  REQUIRE_FALSE(quiet.cuda);
  REQUIRE(quiet.why == "cpu backend: no usable GPU (no CUDA driver on this machine)");
  REQUIRE(quiet.warning.empty());

  const auto warned = choose_backend("auto", too_old);
  REQUIRE_FALSE(warned.cuda);
  REQUIRE_THAT(warned.warning,
               Catch::StartsWith("a GPU is present but cannot be used: the NVIDIA driver supports "
                                 "CUDA 12.4") &&
                   Catch::Contains("using the CPU backend instead (--backend cuda makes this an error"));

  try {
    choose_backend("cuda", too_old);
    FAIL("--backend cuda with an unusable GPU must be refused");
  } catch (const UsageError& error) {
    REQUIRE_THAT(error.reason(),
                 Catch::StartsWith("--backend cuda: no usable GPU (the NVIDIA driver supports CUDA 12.4"));
  }
  try {
    choose_backend("cuda", not_built);
    FAIL("--backend cuda in a CPU-only build must be refused");
  } catch (const UsageError& error) {
    REQUIRE_THAT(error.reason(), Catch::StartsWith("--backend cuda: strider was built without CUDA"));
  }
  REQUIRE_THROWS_AS(choose_backend("gpu", usable), UsageError);
}
