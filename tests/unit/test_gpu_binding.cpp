// The CUDA backend's host logic, which runs in every build: device choice from the node-local rank,
// shared-device detection from UUIDs, the environment flags, interval overlap, and the GPU probe's
// answer checked against the build and the machine's device nodes.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "strider/core/error.hpp"
#include "strider/device/cuda_backend.hpp"
#include "strider/device/gpu_binding.hpp"
#include "strider/device/gpu_probe.hpp"

using namespace strider;

namespace {

DeviceIdentity identity(const std::string& host, unsigned char uuid_seed, int device) {
  unsigned char uuid[16];
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<unsigned char>(uuid_seed + i);
  return make_device_identity(host, uuid, device);
}

}  // namespace

TEST_CASE("the node-local rank picks the device modulo the visible devices", "[gpu-binding]") {
  CHECK(choose_device(0, 4) == 0);
  CHECK(choose_device(3, 4) == 3);
  CHECK(choose_device(5, 4) == 1);
  // Slurm --gpus-per-task=1 or CUDA_VISIBLE_DEVICES per rank: every rank sees one device, number 0.
  for (int local_rank = 0; local_rank < 8; ++local_rank) CHECK(choose_device(local_rank, 1) == 0);
  CHECK_THROWS_AS(choose_device(0, 0), UsageError);
  CHECK_THROWS_AS(choose_device(-1, 2), UsageError);
}

TEST_CASE("device UUIDs print like nvidia-smi", "[gpu-binding]") {
  unsigned char uuid[16];
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<unsigned char>(0xa0 + i);
  CHECK(device_uuid_text(uuid) == "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  const DeviceIdentity long_host = make_device_identity(std::string(100, 'h'), uuid, 2);
  CHECK(std::string(long_host.host) == std::string(63, 'h'));
  CHECK(long_host.device == 2);
}

TEST_CASE("the binding is described host by host, in the order of the hosts' first rank", "[gpu-binding]") {
  const std::vector<DeviceIdentity> ranks = {identity("n02", 1, 0), identity("n01", 2, 0), identity("n02", 3, 1),
                                             identity("n01", 4, 1), identity("n03", 5, 0)};
  CHECK(describe_device_binding(ranks) ==
        "n02: ranks 0,2 -> devices 0,1; n01: ranks 1,3 -> devices 0,1; "
        "n03: rank 4 -> device 0");
  CHECK(describe_device_binding(ranks, 2) ==
        "n02: ranks 0,2 -> devices 0,1; n01: ranks 1,3 -> devices 0,1; ... and 1 more hosts");
  CHECK(describe_device_binding({}).empty());
}

TEST_CASE("ranks of one node that share a physical device are found from their UUIDs", "[gpu-binding]") {
  SECTION("one device per rank: nothing shared") {
    const std::vector<DeviceIdentity> ranks = {identity("n01", 1, 0), identity("n01", 2, 1), identity("n02", 1, 0),
                                               identity("n02", 2, 1)};
    // The same UUID bytes on different hosts are different devices.
    CHECK(ranks_sharing_devices(ranks).empty());
    CHECK(describe_shared_devices(ranks, ranks_sharing_devices(ranks)).empty());
    CHECK_NOTHROW(check_device_sharing(ranks, false));
  }
  SECTION("four ranks on a node with two devices") {
    const std::vector<DeviceIdentity> ranks = {identity("n01", 1, 0), identity("n01", 2, 1), identity("n01", 1, 0),
                                               identity("n01", 2, 1)};
    const auto groups = ranks_sharing_devices(ranks);
    REQUIRE(groups.size() == 2);
    CHECK(groups[0] == std::vector<int>{0, 2});
    CHECK(groups[1] == std::vector<int>{1, 3});
    const std::string text = describe_shared_devices(ranks, groups);
    CHECK(text.find("ranks 0 and 2 on host n01 share GPU-01020304") != std::string::npos);
    CHECK(text.find("ranks 1 and 3") != std::string::npos);
    try {
      check_device_sharing(ranks, false);
      FAIL("sharing a device must be refused");
    } catch (const UsageError& error) {
      CHECK(error.reason().find("ranks 0 and 2") != std::string::npos);
      CHECK(error.reason().find("STRIDER_ALLOW_SHARED_GPU") != std::string::npos);
    }
    CHECK_NOTHROW(check_device_sharing(ranks, true));
  }
  SECTION("different ordinals can be the same device (CUDA_VISIBLE_DEVICES differs per rank)") {
    const std::vector<DeviceIdentity> ranks = {identity("n01", 7, 0), identity("n01", 9, 0), identity("n01", 7, 1)};
    const auto groups = ranks_sharing_devices(ranks);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0] == std::vector<int>{0, 2});
  }
  SECTION("three ranks on one device") {
    const std::vector<DeviceIdentity> ranks = {identity("a", 3, 0), identity("a", 3, 0), identity("a", 3, 0)};
    CHECK(describe_shared_devices(ranks, ranks_sharing_devices(ranks)).find("ranks 0, 1 and 2") != std::string::npos);
  }
}

TEST_CASE("the CUDA backend's environment flags", "[gpu-binding]") {
  CHECK(parse_flag_bool("X", nullptr, false) == false);
  CHECK(parse_flag_bool("X", "", true) == true);
  for (const char* yes : {"1", "true", "YES", "On"}) CHECK(parse_flag_bool("X", yes, false));
  for (const char* no : {"0", "false", "No", "OFF"}) CHECK_FALSE(parse_flag_bool("X", no, true));
  CHECK_THROWS_AS(parse_flag_bool("X", "maybe", false), UsageError);

  CHECK(parse_flag_seconds("T", nullptr, 600.0) == 600.0);
  CHECK(parse_flag_seconds("T", "2.5", 600.0) == 2.5);
  CHECK(parse_flag_seconds("T", "0", 600.0) == 0.0);
  CHECK_THROWS_AS(parse_flag_seconds("T", "-1", 600.0), UsageError);
  CHECK_THROWS_AS(parse_flag_seconds("T", "10s", 600.0), UsageError);

  const CudaBackendFlags defaults = parse_cuda_backend_flags(nullptr, nullptr);
  CHECK_FALSE(defaults.allow_shared_device);
  CHECK(defaults.nccl_timeout_s == 600.0);
  CHECK_FALSE(defaults.nccl_one_rank);
  const CudaBackendFlags set = parse_cuda_backend_flags("1", "30", "yes");
  CHECK(set.allow_shared_device);
  CHECK(set.nccl_timeout_s == 30.0);
  CHECK(set.nccl_one_rank);
  CHECK_THROWS_AS(parse_cuda_backend_flags(nullptr, nullptr, "always"), UsageError);
  // The dense layers: cuBLAS unless STRIDER_CUDA_DENSE says kernels (any case); nothing else.
  CHECK(defaults.dense == CudaDense::cublas);
  CHECK(set.dense == CudaDense::cublas);
  CHECK(parse_cuda_backend_flags(nullptr, nullptr, nullptr, "kernels").dense == CudaDense::kernels);
  CHECK(parse_cuda_backend_flags(nullptr, nullptr, nullptr, "Kernels").dense == CudaDense::kernels);
  CHECK(parse_cuda_backend_flags(nullptr, nullptr, nullptr, "cuBLAS").dense == CudaDense::cublas);
  CHECK(parse_cuda_backend_flags(nullptr, nullptr, nullptr, "").dense == CudaDense::cublas);
  CHECK(std::string(cuda_dense_name(CudaDense::kernels)) == "kernels");
  CHECK(std::string(cuda_dense_name(CudaDense::cublas)) == "cublas");
  try {
    parse_cuda_backend_flags(nullptr, nullptr, nullptr, "naive");
    FAIL("an unknown implementation must be refused");
  } catch (const UsageError& error) {
    CHECK(error.reason().find("STRIDER_CUDA_DENSE='naive': use cublas or kernels") != std::string::npos);
  }
  try {
    parse_cuda_backend_flags("sometimes", nullptr);
    FAIL("a bad value must be refused");
  } catch (const UsageError& error) {
    CHECK(error.reason().find("STRIDER_ALLOW_SHARED_GPU='sometimes'") != std::string::npos);
  }
}

TEST_CASE("overlap of two timed intervals", "[gpu-binding]") {
  CHECK(overlap_ms(TimedInterval{0.0, 2.0, 0}, TimedInterval{1.0, 3.0, 1}) == Approx(1.0));
  CHECK(overlap_ms(TimedInterval{1.0, 3.0, 1}, TimedInterval{0.0, 2.0, 0}) == Approx(1.0));
  CHECK(overlap_ms(TimedInterval{0.0, 1.0, 0}, TimedInterval{1.0, 2.0, 1}) == 0.0);
  CHECK(overlap_ms(TimedInterval{0.0, 1.0, 0}, TimedInterval{5.0, 6.0, 1}) == 0.0);
  CHECK(overlap_ms(TimedInterval{0.0, 10.0, 0}, TimedInterval{2.0, 3.0, 1}) == Approx(1.0));
}

TEST_CASE("the probe's answer matches the build and the machine", "[gpu-binding]") {
  const GpuProbe probe = probe_gpus();
  INFO("device_count " << probe.device_count << ", reason '" << probe.reason << "'");
  // Whatever the branch below, no devices and a reason go together.
  REQUIRE((probe.device_count == 0) == !probe.reason.empty());
  if (!STRIDER_HAS_CUDA) {
    // A build without the CUDA part finds no device on any machine, and says so.
    REQUIRE(probe.device_count == 0);
    REQUIRE_THAT(probe.reason, Catch::Contains("built without CUDA"));
    return;
  }
  // A CUDA build: compare with what the machine shows outside CUDA. The NVIDIA driver creates
  // /dev/nvidiactl and one /dev/nvidiaN per GPU (containers get those of their GPUs).
  std::error_code ignored;
  const bool driver = std::filesystem::exists("/dev/nvidiactl", ignored);
  int device_nodes = 0;
  for (int index = 0; index < 64; ++index)
    device_nodes += std::filesystem::exists("/dev/nvidia" + std::to_string(index), ignored) ? 1 : 0;
  INFO("/dev/nvidiactl " << (driver ? "present" : "absent") << ", " << device_nodes << " /dev/nvidiaN");
  if (!driver || device_nodes == 0) {
    REQUIRE(probe.device_count == 0);
  } else if (std::getenv("CUDA_VISIBLE_DEVICES") == nullptr) {
    // Every device node is a device CUDA can see (CUDA_VISIBLE_DEVICES unset).
    REQUIRE(probe.device_count >= 1);
    REQUIRE(probe.device_count <= device_nodes);
  } else {
    WARN("CUDA_VISIBLE_DEVICES is set: the device count is not compared with the device nodes");
  }
}
