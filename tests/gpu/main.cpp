// Catch2 main for the GPU tests, under mpirun at 1 or 2 ranks. When no rank has a working CUDA device
// (no driver, no device), every rank prints why and exits STRIDER_GPU_SKIP_CODE (77), which ctest
// reports as skipped (SKIP_RETURN_CODE), never as passed. Otherwise the tests run as the MPI tests do
// (tests/rank_ordered_catch.hpp): reports in rank order, one exit code for all ranks.
#include <iostream>
#include <memory>

#include "gpu_test_support.hpp"
#include "rank_ordered_catch.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/device/gpu_probe.hpp"

namespace {
std::unique_ptr<strider::Communicator> world_communicator;
}  // namespace

const strider::Communicator& strider::gpu_testing::world() {
  return *world_communicator;
}

int main(int argc, char** argv) {
  strider::MpiRuntime runtime(argc, argv);
  world_communicator = std::make_unique<strider::Communicator>(strider::Communicator::duplicate(MPI_COMM_WORLD));
  const strider::Communicator& world = *world_communicator;

  const strider::GpuProbe probe = strider::probe_gpus();
  const int devices_everywhere = world.all_reduce(probe.device_count > 0 ? 1 : 0, strider::ReduceOp::min);
  if (devices_everywhere == 0) {
    if (world.is_root()) {
      std::cout << "skipped: no CUDA device (" << (probe.reason.empty() ? "another rank has none" : probe.reason) << ")"
                << std::endl;
    }
    world_communicator.reset();
    return STRIDER_GPU_SKIP_CODE;
  }

  const int any_failed = strider::testing::run_catch_in_rank_order(world, argc, argv);
  world_communicator.reset();
  return any_failed;
}
