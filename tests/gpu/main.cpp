// Catch2 main for the GPU tests, under mpirun at 1 or 2 ranks. When no rank has a working CUDA device
// (no driver, no device), every rank prints why and exits STRIDER_GPU_SKIP_CODE (77), which ctest
// reports as skipped (SKIP_RETURN_CODE), never as passed. Otherwise every rank runs the tests with its
// report going to a file, rank 0 prints the reports in rank order, and all ranks exit with one code.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "gpu_test_support.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/device/gpu_probe.hpp"

namespace {
std::unique_ptr<strider::Communicator> world_communicator;
}  // namespace

const strider::Communicator& strider::gpu_testing::world() { return *world_communicator; }

int main(int argc, char** argv) {
  strider::MpiRuntime runtime(argc, argv);
  world_communicator = std::make_unique<strider::Communicator>(strider::Communicator::duplicate(MPI_COMM_WORLD));
  const strider::Communicator& world = *world_communicator;

  const strider::GpuProbe probe = strider::probe_gpus();
  const int devices_everywhere = world.all_reduce(probe.device_count > 0 ? 1 : 0, strider::ReduceOp::min);
  if (devices_everywhere == 0) {
    if (world.is_root()) {
      std::cout << "skipped: no CUDA device (" << (probe.reason.empty() ? "another rank has none" : probe.reason)
                << ")" << std::endl;
    }
    world_communicator.reset();
    return STRIDER_GPU_SKIP_CODE;
  }

  char path[] = "/tmp/strider_gpu_tests_XXXXXX";
  const int descriptor = mkstemp(path);
  if (descriptor >= 0) close(descriptor);
  Catch::Session session;
  int failed = session.applyCommandLine(argc, argv);
  if (failed == 0) {
    session.configData().outputFilename = path;
    failed = session.run();
  }
  std::stringstream report;
  report << std::ifstream(path).rdbuf();
  std::remove(path);

  for (int rank = 0; rank < world.size(); ++rank) {
    std::string text = world.rank() == rank ? report.str() : std::string();
    world.broadcast(text, rank);
    if (world.is_root()) std::cout << "===== rank " << rank << " of " << world.size() << " =====\n" << text << std::flush;
  }
  const int any_failed = world.all_reduce(failed != 0 ? 1 : 0, strider::ReduceOp::max);
  world_communicator.reset();
  return any_failed;
}
