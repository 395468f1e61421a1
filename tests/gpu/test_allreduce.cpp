// The gradient all-reduce at 2 ranks, against the CPU backend's MPI all-reduce on the same batches.
// With a GPU per rank it runs NCCL; when the ranks would share one GPU, the test first checks that this
// is refused (UsageError on every rank) and then allows it: gradients then go through MPI in host
// memory, since NCCL refuses two ranks on one device. Every rank computes, then the ranks agree on
// the outcome before asserting, so that a failure on one rank cannot leave the other blocked.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "gpu_test_support.hpp"
#include "strider/core/error.hpp"
#include "strider/device/cpu_backend.hpp"
#include "strider/device/cuda_backend.hpp"
#include "strider/device/gpu_binding.hpp"

using namespace strider;
using namespace strider::gpu_testing;

namespace {

bool all_ranks(bool local) {
  return world().all_reduce(local ? 1 : 0, ReduceOp::min) == 1;
}

}  // namespace

TEST_CASE("gradients all-reduced on the GPUs equal the CPU backend's MPI all-reduce", "[allreduce]") {
  const Communicator& comm = world();
  ::unsetenv("STRIDER_ALLOW_SHARED_GPU");
  ModelConfig config;
  config.kind = "mlp";
  config.features = 24;
  config.hidden = 32;
  config.num_classes = 5;
  config.seed = 3;

  // First without permission to share: refused (the same UsageError on every rank) exactly when the
  // ranks share a device, e.g. two ranks on a machine with one GPU.
  auto cuda = make_cuda_backend(comm, false);
  cuda->initialize(config);
  bool refused = false;
  try {
    cuda->connect(comm);  // what the first all_reduce_gradients would do
  } catch (const UsageError& error) {
    refused = std::string(error.what()).find("share") != std::string::npos;
  }
  const bool shared = comm.all_reduce(refused ? 1 : 0, ReduceOp::max) == 1;
  CHECK(all_ranks(refused) == shared);  // every rank decided the same
  if (shared) {
    cuda = make_cuda_backend(comm, true);
    cuda->initialize(config);
  }
  CpuBackend cpu;
  cpu.initialize(config);
  bool gradients_match = true;
  bool identical_across_ranks = true;
  for (int step = 0; step < 3; ++step) {
    // Ranks hold batches of different sizes; one rank's batch is empty at step 2.
    const std::int64_t rows = (step == 2 && comm.rank() == 1) ? 0 : 40 + 24 * comm.rank();
    PinnedBatch batch =
        make_feature_batch(std::max<std::int64_t>(rows, 1), 24, ElementType::float32, 5,
                           1000 * static_cast<std::uint64_t>(step) + static_cast<std::uint64_t>(comm.rank()));
    batch.input.count = rows;
    const StepResult on_gpu = cuda->forward_backward(batch.input);
    cpu.forward_backward(batch.input);
    const std::int64_t global = comm.all_reduce(on_gpu.count, ReduceOp::sum);
    cuda->all_reduce_gradients(comm, global);
    cpu.all_reduce_gradients(comm, global);
    const std::vector<float> gpu_gradients = cuda->gradients();
    const std::vector<float> cpu_gradients = cpu.gradients();
    if (max_abs_difference(gpu_gradients, cpu_gradients) > 2e-4 * (1.0 + max_abs(cpu_gradients)))
      gradients_match = false;
    // Every rank must hold the same all-reduced gradients (the parameters then stay identical).
    std::vector<float> root_gradients = gpu_gradients;
    comm.broadcast(root_gradients);
    if (root_gradients != gpu_gradients) identical_across_ranks = false;
    cuda->apply_sgd(0.05f, 0.9f);
    cpu.apply_sgd(0.05f, 0.9f);
  }
  CHECK(all_ranks(gradients_match));
  CHECK(all_ranks(identical_across_ranks));
  std::vector<float> parameters = cuda->parameters();
  std::vector<float> root_parameters = parameters;
  comm.broadcast(root_parameters);
  CHECK(all_ranks(parameters == root_parameters));
  const CudaBackendStats stats = cuda_backend_stats(*cuda);
  // scripts/gpu-check.sh reads this line to say whether NCCL ran.
  if (comm.is_root())
    std::cout << "gpu all-reduce mode at " << comm.size() << " ranks: " << stats.all_reduce << std::endl;
  // One rank reduces locally, unless STRIDER_TEST_NCCL_ONE_RANK makes it a NCCL communicator of one.
  const bool local = comm.size() == 1 && !cuda_backend_flags_from_environment().nccl_one_rank;
  CHECK(stats.all_reduce == (local ? "local" : (shared ? "mpi-host" : "nccl")));
  CHECK(stats.all_reduce_ms >= 0.0);
}
