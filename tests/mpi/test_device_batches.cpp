// make_device_batches: which device each choice takes on this machine and why, and the options it
// refuses before anything is made (the same decision on every rank: nothing here is collective).
#include <catch2/catch.hpp>

#include "mpi_test_support.hpp"
#include "strider/core/error.hpp"
#include "strider/device/device_batches.hpp"
#include "strider/device/gpu_probe.hpp"

using namespace strider;
using Catch::Matchers::Contains;
using strider::testing::world;

TEST_CASE("make_device_batches: cpu is the twin, auto follows the GPU probe", "[mpi][device-batches]") {
  std::string why;
  const auto cpu = make_device_batches("cpu", world(), {}, &why);
  CHECK(cpu->name() == "cpu");
  CHECK(cpu->device() == -1);
  CHECK(cpu->host_allocator()->name() == "page-aligned");
  CHECK(why == "cpu device batches: requested with make_device_batches choice cpu");

  const GpuProbe probe = probe_gpus();
  const auto automatic = make_device_batches("auto", world(), {}, &why);
  if (probe.device_count == 0) {
    CHECK(automatic->name() == "cpu");
    CHECK(why == "cpu device batches: no usable GPU (" + probe.reason + ")");
    CHECK_THROWS_AS(make_device_batches("cuda", world(), {}, nullptr), UsageError);
    CHECK_THROWS_WITH(make_device_batches("cuda", world(), {}, nullptr), Contains("make_device_batches choice cuda: "));
  } else {
    CHECK(automatic->name() == "cuda");
    CHECK(automatic->device() == world().local_rank() % probe.device_count);
    CHECK(automatic->host_allocator()->name() == "cuda-pinned");
    CHECK_THAT(why, Contains("cuda device batches: "));
  }
}

TEST_CASE("make_device_batches refuses bad choices and options by name", "[mpi][device-batches][errors]") {
  CHECK_THROWS_WITH(make_device_batches("gpu", world(), {}, nullptr),
                    Contains("make_device_batches choice must be auto, cpu or cuda, got 'gpu'"));
  CHECK_THROWS_WITH(make_device_batches("cpu", world(), DeviceBatchOptions{{}, 65}, nullptr),
                    Contains("DeviceBatchOptions::slots must be 1..64, got 65"));
  DeviceBatchOptions to_integer;
  to_integer.conversion.output = ElementType::int32;
  CHECK_THROWS_WITH(make_device_batches("auto", world(), to_integer, nullptr),
                    Contains("convert samples to float32 or float16, not to int32"));
  DeviceBatchOptions unconverted;
  unconverted.conversion.normalization = Normalization{StatisticsLayout::per_feature, {0}, {1}};
  CHECK_THROWS_WITH(make_device_batches("cpu", world(), unconverted, nullptr),
                    Contains("normalization needs a float output type"));
}
