// strider-inspect: look at what strider would do, without training.
//   strider-inspect plan ...   a sampler's plan (no MPI launcher needed)
// Each subcommand lives in its own file; see --help.

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/option_text.hpp"
#include "subcommands.hpp"

namespace {

constexpr const char* usage =
    "usage: strider-inspect <command> [options]\n"
    "commands:\n"
    "  plan   print a sampler's plan: which global indices each rank reads, step by step\n"
    "  info   a dataset (a file or shards): shape, type, layout, chunking, size, engine, class and length histograms\n"
    "  dump   rows of a dataset file as the pipeline's reader returns them: index label v0 v1 ...\n"
    "  read-speed  samples/s of one reader engine on shuffled batches (mpirun for several ranks)\n"
    "  stats  count, mean, std, min and max per feature or per channel over all rows (mpirun: in parallel)\n"
    "  workloads   the MLPerf Storage workloads of --workload (sample, batch, compute, AU threshold)\n"
    "run 'strider-inspect <command> --help' for a command's options";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::cout << usage << std::endl;
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::cout << strider::cli::version_text("strider-inspect") << std::flush;
    return 0;
  }
  const std::string command = argv[1];
  for (const strider::inspect::Subcommand& subcommand : strider::inspect::subcommands()) {
    if (command == subcommand.name) return subcommand.run(argc, argv);
  }
  std::vector<std::string> names;
  for (const strider::inspect::Subcommand& subcommand : strider::inspect::subcommands())
    names.push_back(subcommand.name);
  const std::string near = strider::nearest_name(command, names);
  strider::print_error_line("unknown command '" + command + "'" +
                            (near.empty() ? "" : "; did you mean '" + near + "'?") + " (see strider-inspect --help)");
  return 2;
}
