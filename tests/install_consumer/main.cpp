// Uses the installed public API: a communicator on MPI_COMM_WORLD, the agreed seed, and a plan.
#include <mpi.h>

#include <iostream>
#include <strider/comm/communicator.hpp>
#include <strider/comm/seed.hpp>
#include <strider/sampling/distributed_sampler.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    strider::Communicator comm = strider::Communicator::duplicate(MPI_COMM_WORLD);
    strider::DistributedSamplerConfig config;
    config.dataset_size = 10;
    config.seed = strider::agree_on_seed(comm, 0);
    strider::DistributedSampler sampler(config, 3, 0);
    sampler.set_epoch(1);
    std::vector<std::int64_t> batch;
    sampler.batch(0, batch);
    for (std::size_t i = 0; i < batch.size(); ++i) std::cout << (i ? " " : "") << batch[i];
    std::cout << std::endl;
  }
  MPI_Finalize();
  return 0;
}
