// The library on a sub-communicator (README: it works on a duplicate of any communicator): the world
// is split in two halves (MPI_Comm_split), and each half at the same time writes its own file, reads
// its own plan through reader + sampler + prefetcher, and trains with train(), seeing its own size,
// ranks and plans. A collective on MPI_COMM_WORLD anywhere inside would mix the halves (or hang).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "mpi_test_support.hpp"
#include "strider/comm/seed.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/sampling/distributed_sampler.hpp"
#include "strider/train/trainer.hpp"

using namespace strider;

namespace {

/// The half's part of the test; returns the number of failed checks on this rank.
std::int64_t run_half(const Communicator& half, int color, int expected_size, int expected_rank) {
  std::int64_t wrong = 0;
  if (half.size() != expected_size || half.rank() != expected_rank) {
    UNSCOPED_INFO("half " << color << ": size " << half.size() << " rank " << half.rank() << ", expected "
                          << expected_size << " and " << expected_rank);
    ++wrong;
  }
  // Each half its own file and size, so that their plans differ.
  const std::int64_t rows = 300 + 37 * color;
  std::string path =
      half.is_root() ? "/tmp/strider_subcomm_" + std::to_string(getpid()) + "_" + std::to_string(color) + ".h5" : "";
  half.broadcast(path);
  SyntheticOptions options;
  options.samples = rows;
  options.classes = 3;
  options.dim = 4;
  options.seed = 9;
  options.progress = false;
  write_synthetic_dataset(half, path, options);

  // Reader + sampler + prefetcher: the half's ranks cover [0, rows) exactly once (no padding when
  // the half's size divides rows), with ceil(rows / size) samples each.
  DistributedSamplerConfig config;
  config.dataset_size = rows;
  config.batch_size = 8;
  config.seed = agree_on_seed(half, 40 + 10 * color + half.rank());  // the half's rank 0 decides
  if (config.seed != 40 + 10 * color) ++wrong;
  DistributedSampler sampler(config, half.size(), half.rank());
  sampler.set_epoch(1);
  std::vector<std::int64_t> seen(static_cast<std::size_t>(rows), 0);
  std::int64_t samples = 0;
  {
    Prefetcher prefetcher(open_reader(half, path, ReaderOptions{}), PrefetcherOptions{3, nullptr});
    if (prefetcher.dataset().num_samples != rows) ++wrong;
    prefetcher.start_epoch(sampler);
    while (auto batch = prefetcher.next()) {
      for (std::int64_t index : batch->indices()) ++seen[static_cast<std::size_t>(index)];
      samples += batch->size();
    }
  }
  const std::int64_t per_rank = (rows + half.size() - 1) / half.size();
  if (samples != per_rank) ++wrong;
  half.all_reduce(seen.data(), rows, ReduceOp::sum);
  const std::int64_t padding = per_rank * half.size() - rows;
  std::int64_t covered = 0, repeated = 0;
  for (std::int64_t count : seen) {
    covered += count > 0 ? 1 : 0;
    repeated += count > 1 ? count - 1 : 0;
  }
  if (covered != rows || repeated != padding) {
    UNSCOPED_INFO("half " << color << ": " << covered << " of " << rows << " rows covered, " << repeated
                          << " repeats (expected " << padding << ")");
    ++wrong;
  }

  // train(): one epoch on the half's file, evaluation counts each of its rows once.
  TrainerConfig train_config;
  train_config.loader.data_path = path;
  train_config.loader.sampler.batch_size = 8;
  train_config.loader.seed = 3;
  train_config.backend = "cpu";
  const TrainSummary summary = train(half, train_config);
  if (summary.eval_samples != rows || static_cast<int>(summary.ranks.size()) != half.size() ||
      summary.epochs.size() != 1 || summary.epochs[0].samples != per_rank * half.size()) {
    UNSCOPED_INFO("half " << color << ": train() evaluated " << summary.eval_samples << " samples on "
                          << summary.ranks.size() << " ranks, trained " << summary.epochs[0].samples);
    ++wrong;
  }
  half.barrier();
  if (half.is_root()) std::remove(path.c_str());
  return wrong;
}

}  // namespace

TEST_CASE("reader, sampler, prefetcher and train() on each half of a split world", "[mpi][subcomm]") {
  const Communicator& world = strider::testing::world();
  const int first_half = (world.size() + 1) / 2;
  const int color = world.rank() < first_half ? 0 : 1;
  MPI_Comm split = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_split(world.native(), color, world.rank(), &split) == MPI_SUCCESS);
  std::int64_t wrong = 0;
  {
    const Communicator half = Communicator::duplicate(split);
    wrong = half.collective_try([&] {
      return run_half(half, color, color == 0 ? first_half : world.size() - first_half,
                      color == 0 ? world.rank() : world.rank() - first_half);
    });
  }
  MPI_Comm_free(&split);
  REQUIRE(world.all_reduce(wrong, ReduceOp::sum) == 0);
}
