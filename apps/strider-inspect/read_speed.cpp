// strider-inspect read-speed FILE: the reader alone (no I/O thread, no model): each rank reads its
// shuffled batches of the distributed sampler with one engine and the ranks report samples/s
// together. --per-row reads the same rows one read() call each (to see what batching saves, e.g.
// chunks decompressed once per batch instead of once per row).

#include <time.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "file_options.hpp"
#include "strider/comm/mpi_runtime.hpp"
#include "strider/core/log.hpp"
#include "strider/pipeline/loader.hpp"
#include "subcommands.hpp"

namespace strider::inspect {
namespace {

/// CPU seconds of this process (all its threads): a figure that holds on a busy machine too.
double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

int read_speed_main(Communicator& world, int argc, char** argv) {
  LoaderOptions loading;
  std::int64_t steps = 1000;
  bool per_row = false;
  cli::HelpGroups groups;
  cli::SharedOptions shared;
  shared.add(groups.sampling, cli::loader_option_names("sampling"), {{"seed", "0"}});
  groups.sampling.add_options()("steps", cli::po::value<std::int64_t>(&steps)->default_value(steps),
                                "batches per rank (at most one epoch)");
  shared.add(groups.pipeline, {"copy-threads", "max-open-files"});
  groups.diagnostics.add_options()("per-row", cli::po::bool_switch(&per_row),
                                   "one read() per row instead of one per batch");
  const cli::Parsed parsed = parse_file_command(
      world, argc, argv, groups,
      "usage: [mpirun -np R] strider-inspect read-speed FILE [--engine E] [--batch-size 32] [--steps 1000]\n"
      "Reads shuffled batches with one engine and prints samples/s over all ranks.",
      loading.data_path, loading.reader, [&](const cli::Parsed& result) {
        shared.apply(result.values, loading);
        if (steps < 0) STRIDER_THROW(UsageError, "--steps must be >= 0, got " + std::to_string(steps));
      });
  if (parsed.help) return 0;

  // The reader alone: batches read on this thread (no I/O thread, one buffer), labels held in memory
  // as open_reader holds them by default, the epoch planned and its buffer allocated before the clock.
  loading.io_thread = false;
  loading.plan_ahead = false;
  loading.prefetch = 1;
  loading.labels_in_memory = true;
  loading.diagnostics.read_rows_one_by_one = per_row;
  loading.max_steps_per_epoch = steps;
  Loader loader(world, loading);
  steps = steps > 0 ? loader.steps(0) : 0;
  LoaderEpoch epoch = loader.epoch(0);

  world.barrier();
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  std::int64_t rows = 0;
  world.collective_try([&] {
    if (steps > 0)
      for (Batch batch : epoch) rows += batch.size();
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = world.all_reduce(process_cpu_seconds() - cpu_start, ReduceOp::sum);
  const PrefetchStats stats = loader.stats();
  const double slowest = world.all_reduce(seconds, ReduceOp::max);
  const std::int64_t all_rows = world.all_reduce(rows, ReduceOp::sum);
  const std::int64_t useful = world.all_reduce(stats.useful_bytes, ReduceOp::sum);
  const std::int64_t read = world.all_reduce(stats.bytes_read, ReduceOp::sum);
  const std::int64_t calls = world.all_reduce(stats.read_calls, ReduceOp::sum);
  std::ostringstream line;
  line << std::fixed << std::setprecision(0) << "read-speed " << loader.engine() << (per_row ? " per-row" : "") << ": "
       << world.size() << " ranks, " << all_rows << " samples in " << std::setprecision(3) << slowest
       << " s = " << std::setprecision(0) << static_cast<double>(all_rows) / slowest << " samples/s, "
       << std::setprecision(1) << static_cast<double>(useful) / slowest / 1e6 << " MB/s useful, read/useful "
       << std::setprecision(2) << (useful > 0 ? static_cast<double>(read) / static_cast<double>(useful) : 0.0) << ", "
       << std::setprecision(1)
       << static_cast<double>(calls) / static_cast<double>(std::max<std::int64_t>(1, steps * world.size()))
       << " read calls per batch, " << std::setprecision(0) << static_cast<double>(all_rows) / cpu_seconds
       << " samples per CPU-second";
  print_on_root(line.str());
  loader.close();
  return 0;
}

}  // namespace

int run_read_speed(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) { return read_speed_main(world, argc, argv); });
}

}  // namespace strider::inspect
