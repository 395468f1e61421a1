// strider-inspect read-speed FILE: the reader alone (no prefetcher, no model): each rank reads its
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
  ReaderOptions reader_options;
  SamplerOptions sampler;
  sampler.batch_size = 256;
  std::string path;
  std::int64_t steps = 1000;
  bool per_row = false;
  cli::po::options_description description("read-speed options");
  description.add_options()("steps", cli::po::value<std::int64_t>(&steps)->default_value(steps),
                            "batches per rank (at most one epoch)")(
      "seed", cli::po::value<std::int64_t>(&sampler.seed)->default_value(0), "the sampler's seed")(
      "copy-threads", cli::po::value<int>(&reader_options.copy_threads)->default_value(1), "direct/mmap copy threads")(
      "per-row", cli::po::bool_switch(&per_row), "one read() per row instead of one per batch");
  cli::add_sampler_options(description, sampler);
  const cli::Parsed parsed = parse_file_command(
      world, argc, argv, description,
      "usage: [mpirun -np R] strider-inspect read-speed FILE [--engine E] [--batch-size 256] [--steps 1000]\n"
      "Reads shuffled batches with one engine and prints samples/s over all ranks.",
      path, reader_options, [&](const cli::Parsed& result) { cli::finish_sampler_options(result.values, sampler); });
  if (parsed.help) return 0;

  std::unique_ptr<BatchReader> reader = open_reader(world, path, reader_options);
  sampler.dataset_size = reader->info().num_samples;
  std::unique_ptr<Sampler> plan =
      world.collective_try([&] { return make_sampler(sampler, world.size(), world.rank()); });
  plan->set_epoch(0);
  steps = std::min(steps, plan->num_steps());
  std::vector<std::vector<std::int64_t>> batches(static_cast<std::size_t>(steps));
  for (std::int64_t step = 0; step < steps; ++step) plan->batch(step, batches[step]);
  std::int64_t capacity = 0;
  for (const auto& batch : batches)
    capacity = std::max(capacity, reader->samples_bytes(batch.data(), static_cast<std::int64_t>(batch.size())));
  std::vector<std::byte> samples(static_cast<std::size_t>(capacity));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(plan->max_batch_size()) + 1);
  std::vector<std::int64_t> offsets(labels.size() + 1);

  world.barrier();
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  std::int64_t rows = 0;
  world.collective_try([&] {
    for (const auto& batch : batches) {
      const auto count = static_cast<std::int64_t>(batch.size());
      if (per_row) {
        std::int64_t at = 0;
        for (std::int64_t k = 0; k < count; ++k) {
          const std::int64_t bytes = reader->samples_bytes(&batch[k], 1);
          reader->read(&batch[k], 1, BatchDestination{samples.data() + at, capacity - at, labels.data() + k, nullptr});
          at += bytes;
        }
      } else {
        reader->read(batch.data(), count, BatchDestination{samples.data(), capacity, labels.data(), offsets.data()});
      }
      rows += count;
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = world.all_reduce(process_cpu_seconds() - cpu_start, ReduceOp::sum);
  const ReadStats stats = reader->stats();
  const double slowest = world.all_reduce(seconds, ReduceOp::max);
  const std::int64_t all_rows = world.all_reduce(rows, ReduceOp::sum);
  const std::int64_t useful = world.all_reduce(stats.useful_bytes, ReduceOp::sum);
  const std::int64_t read = world.all_reduce(stats.bytes_read, ReduceOp::sum);
  const std::int64_t calls = world.all_reduce(stats.read_calls, ReduceOp::sum);
  std::ostringstream line;
  line << std::fixed << std::setprecision(0) << "read-speed " << reader->engine() << (per_row ? " per-row" : "") << ": "
       << world.size() << " ranks, " << all_rows << " samples in " << std::setprecision(3) << slowest
       << " s = " << std::setprecision(0) << static_cast<double>(all_rows) / slowest << " samples/s, "
       << std::setprecision(1) << static_cast<double>(useful) / slowest / 1e6 << " MB/s useful, read/useful "
       << std::setprecision(2) << (useful > 0 ? static_cast<double>(read) / static_cast<double>(useful) : 0.0) << ", "
       << std::setprecision(1)
       << static_cast<double>(calls) / static_cast<double>(std::max<std::int64_t>(1, steps * world.size()))
       << " read calls per batch, " << std::setprecision(0) << static_cast<double>(all_rows) / cpu_seconds
       << " samples per CPU-second";
  print_on_root(line.str());
  return 0;
}

}  // namespace

int run_read_speed(int argc, char** argv) {
  return run_mpi_app(argc, argv, [&](Communicator& world) { return read_speed_main(world, argc, argv); });
}

}  // namespace strider::inspect
