// Catch2 main for the MPI tests: every rank runs the tests, rank 0 prints the reports in rank order
// (tests/rank_ordered_catch.hpp), and every rank exits with the same code.
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
  const int any_failed = strider::testing::run_catch_in_rank_order(*world_communicator, argc, argv);
  world_communicator.reset();
  return any_failed;
}
