#pragma once
// The subcommands of strider-inspect. Each returns the process exit code and handles its own MPI
// (plan needs none).

#include <vector>

namespace strider::inspect {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[1] is the subcommand's name
};

int run_plan(int argc, char** argv);
int run_info(int argc, char** argv);
int run_dump(int argc, char** argv);
int run_read_speed(int argc, char** argv);
int run_stats(int argc, char** argv);
int run_workloads(int argc, char** argv);

/// Every subcommand, in the order --help lists them.
const std::vector<Subcommand>& subcommands();

}  // namespace strider::inspect
