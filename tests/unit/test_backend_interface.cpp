// What a trainer asks a backend instead of its name: the CPU backend's answers (the CUDA backend's
// are checked in tests/gpu), and pinned memory refused where the build has no CUDA.
#include <catch2/catch.hpp>
#include <cstdint>

#include "strider/config.hpp"
#include "strider/core/error.hpp"
#include "strider/device/cpu_backend.hpp"
#include "strider/device/pinned_allocator.hpp"

using namespace strider;

TEST_CASE("the CPU backend stages nothing and holds batches in page-aligned memory", "[device]") {
  CpuBackend backend;
  REQUIRE_FALSE(backend.overlaps_copies());
  const std::shared_ptr<HostAllocator> allocator = backend.host_allocator();
  REQUIRE(allocator != nullptr);
  REQUIRE(allocator->name() == "page-aligned");
  void* memory = allocator->allocate(5000);
  REQUIRE(reinterpret_cast<std::uintptr_t>(memory) % 4096 == 0);
  allocator->deallocate(memory, 5000);
}

#if !STRIDER_HAS_CUDA  // the CUDA build allocates it (tests/gpu)
TEST_CASE("pinned memory is a usage error in a build without CUDA", "[device]") {
  REQUIRE_THROWS_AS(make_pinned_allocator(), UsageError);
}
#endif
