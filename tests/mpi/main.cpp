// Catch2 main for the MPI tests: every rank runs the tests with its report going to a file; rank 0
// prints the reports in rank order (whole reports of failing ranks, the last line of the others), and
// every rank exits with the same code.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "mpi_test_support.hpp"
#include "strider/comm/mpi_runtime.hpp"

namespace {
std::unique_ptr<strider::Communicator> world_communicator;

std::string last_line(const std::string& text) {
  std::string trimmed = text;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r')) trimmed.pop_back();
  const std::size_t newline = trimmed.rfind('\n');
  return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}
}  // namespace

const strider::Communicator& strider::testing::world() { return *world_communicator; }

int main(int argc, char** argv) {
  strider::MpiRuntime runtime(argc, argv);
  world_communicator = std::make_unique<strider::Communicator>(strider::Communicator::duplicate(MPI_COMM_WORLD));
  const strider::Communicator& world = *world_communicator;

  char path[] = "/tmp/strider_mpi_tests_XXXXXX";
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

  // Reports travel to rank 0 one rank at a time, in rank order.
  const std::int32_t my_failed = failed;
  const auto failures = world.all_gather(my_failed);
  for (int rank = 0; rank < world.size(); ++rank) {
    std::string text = world.rank() == rank ? report.str() : std::string();
    world.broadcast(text, rank);
    if (world.is_root()) {
      if (failures[static_cast<std::size_t>(rank)] != 0) {
        std::cout << "===== rank " << rank << " of " << world.size() << ": FAILED =====\n" << text << std::endl;
      } else {
        std::cout << "rank " << rank << " of " << world.size() << ": " << last_line(text) << std::endl;
      }
    }
  }
  const int any_failed = world.all_reduce(failed != 0 ? 1 : 0, strider::ReduceOp::max);
  world_communicator.reset();
  return any_failed;
}
