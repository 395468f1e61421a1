#pragma once
// The part of every MPI test main (tests/mpi, tests/fuzz, tests/gpu) that runs Catch2 on each rank:
// the report goes to a file, rank 0 prints the reports in rank order (whole reports of failing
// ranks, the last line of the others), and every rank returns the same exit code.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "catch_session.hpp"
#include "strider/comm/communicator.hpp"

namespace strider::testing {

inline std::string last_report_line(const std::string& text) {
  std::string trimmed = text;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r')) trimmed.pop_back();
  const std::size_t newline = trimmed.rfind('\n');
  return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

/// Collective over world: runs the Catch2 session on every rank and returns the agreed exit code
/// (1 when any rank failed).
inline int run_catch_in_rank_order(const Communicator& world, int argc, char** argv) {
  char path[] = "/tmp/strider_mpi_tests_XXXXXX";
  const int descriptor = mkstemp(path);
  if (descriptor >= 0) close(descriptor);

  const int failed = run_catch_session(argc, argv, path);
  std::stringstream report;
  report << std::ifstream(path).rdbuf();
  std::remove(path);

  // Reports travel to rank 0 one rank at a time, in rank order.
  const std::int32_t my_failed = failed;
  const auto failures = world.all_gather(my_failed);
  for (int rank = 0; rank < world.size(); ++rank) {
    std::string text = world.rank() == rank ? report.str() : std::string();
    world.broadcast(text, rank);
    if (!world.is_root()) continue;
    if (failures[static_cast<std::size_t>(rank)] != 0) {
      std::cout << "===== rank " << rank << " of " << world.size() << ": FAILED =====\n" << text << std::endl;
    } else {
      std::cout << "rank " << rank << " of " << world.size() << ": " << last_report_line(text) << std::endl;
    }
  }
  return world.all_reduce(failed != 0 ? 1 : 0, ReduceOp::max);
}

}  // namespace strider::testing
