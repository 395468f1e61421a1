// Catch2 main for the MPI tests: every rank runs the tests, rank 0 prints the reports in rank order
// (tests/rank_ordered_catch.hpp), and every rank exits with the same code.
#define CATCH_CONFIG_RUNNER
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <memory>

#include "mpi_test_support.hpp"
#include "rank_ordered_catch.hpp"
#include "strider/comm/mpi_runtime.hpp"

namespace {
std::unique_ptr<strider::Communicator> world_communicator;
}  // namespace

const strider::Communicator& strider::testing::world() {
  return *world_communicator;
}

int main(int argc, char** argv) {
  strider::MpiRuntime runtime(argc, argv);
  world_communicator = std::make_unique<strider::Communicator>(strider::Communicator::duplicate(MPI_COMM_WORLD));
  int any_failed = strider::testing::run_catch_in_rank_order(*world_communicator, argc, argv);
  // No HDF5 object (file, dataset, ...) may outlive the readers and test files that opened it.
  const ssize_t open_objects = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open_objects != 0)
    std::cerr << "rank " << world_communicator->rank() << ": " << open_objects << " HDF5 objects still open at exit"
              << std::endl;
  if (world_communicator->all_reduce(open_objects != 0 ? 1 : 0, strider::ReduceOp::max) != 0) any_failed = 1;
  world_communicator.reset();
  return any_failed;
}
